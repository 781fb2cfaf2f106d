#include "lily/server/http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "lily/error.h"

namespace lily::http {

using Clock = std::chrono::steady_clock;

struct Server::Connection {
  int fd = -1;
  std::string addr;
  std::string buf;
  size_t scanned = 0;      // bytes searched for the end of the head
  size_t need = 0;         // head + body, once the head is in
  bool head_done = false;
  bool peer_closed = false;  // the client shut its side: answer what is here, then close
  Clock::time_point deadline;
};

namespace {

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::string address_of(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof buf);
  if (a.ss_family == AF_INET6) inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, buf, sizeof buf);
  return buf;
}

// Sends all of `data` before `deadline`; false when the client went away or did not read in time.
bool send_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool peer_gone(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return false;
}

class Sink : public StreamSink {
 public:
  Sink(int fd, bool chunked, double write_timeout_s) : fd_(fd), chunked_(chunked), timeout_s_(write_timeout_s) {}
  bool write(std::string_view data) override {
    if (failed_) return false;
    if (data.empty()) return true;
    if (chunked_) {
      char size[24];
      const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      std::string chunk(size, static_cast<size_t>(n));
      chunk.append(data).append("\r\n");
      failed_ = !send_all(fd_, chunk, after(timeout_s_));
    } else {
      failed_ = !send_all(fd_, data, after(timeout_s_));
    }
    return !failed_;
  }
  bool client_gone() override { return failed_ || peer_gone(fd_); }
  bool finish() { return failed_ ? false : !chunked_ || send_all(fd_, "0\r\n\r\n", after(timeout_s_)); }
  bool failed() const { return failed_; }

 private:
  int fd_;
  bool chunked_;
  double timeout_s_;
  bool failed_ = false;
};

}  // namespace

Server::Server(ServerLimits limits) : limits_(std::move(limits)) {
  // Each connection is a descriptor: keep the cap below what the process may open.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &rl);
      ::getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 128)
      limits_.max_connections = std::min<size_t>(limits_.max_connections, rl.rlim_cur - 64);
  }
}

Server::~Server() {
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_})
    if (fd >= 0) ::close(fd);
}

void Server::route(const std::string& method, const std::string& path, Handler handler) {
  const bool prefix = !path.empty() && path.back() == '*';
  routes_.push_back({method, prefix ? path.substr(0, path.size() - 1) : path, prefix, std::move(handler)});
}

int Server::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || res == nullptr)
    throw Error("cannot listen on " + host + ":" + service + " (not an address of this machine)");
  std::string why = "in use, or not an address of this machine";
  for (addrinfo* a = res; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    // SO_REUSEADDR lets a restart bind while old connections linger; no
    // SO_REUSEPORT, which would let a second server share the port.
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 512) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) throw Error("cannot listen on " + host + ":" + service + " (" + why + ")");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  const int bound = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(ss).sin6_port)
                                             : ntohs(reinterpret_cast<sockaddr_in&>(ss).sin_port);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw Error(std::string("cannot set up the server: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  running_ = true;
  return bound;
}

void Server::stop() {
  stopping_ = true;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);  // async-signal-safe
  }
}

void Server::run() {
  if (listen_fd_ < 0) throw Error("the server is not bound");
  epoll_event events[64];
  while (!stopping_) {
    const int n = ::epoll_wait(epoll_fd_, events, 64, 200);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        accept_all();
      } else if (fd == wake_fd_) {
        uint64_t v;
        while (::read(wake_fd_, &v, sizeof v) > 0) {
        }
        adopt_returned();
      } else if (auto it = reading_.find(fd); it != reading_.end()) {
        on_readable(*it->second);
        if (auto again = reading_.find(fd); again != reading_.end()) advance(again->second);
        if (auto again = reading_.find(fd); again != reading_.end() && again->second->peer_closed) close_connection(fd);
      }
    }
    expire(Clock::now());
  }
  // Stop: no new connections; end those being read and wake every handler
  // (its next write or client check fails), then wait for them.
  ::close(listen_fd_);
  listen_fd_ = -1;
  std::vector<int> fds;
  for (const auto& [fd, c] : reading_) fds.push_back(fd);
  for (int fd : fds) close_connection(fd);
  std::unique_lock<std::mutex> lock(mu_);
  for (int fd : handled_fds_) ::shutdown(fd, SHUT_RDWR);
  idle_.wait(lock, [&] { return handlers_ == 0; });
  for (const auto& c : returned_) ::close(c->fd);  // given back while the loop was ending
  returned_.clear();
  running_ = false;
}

void Server::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors: the rest wait in the backlog
    }
    const std::string addr = address_of(ss);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (open_ >= limits_.max_connections) {
        reject(fd, 503, "the server has too many open connections");
        continue;
      }
      if (per_address_[addr] >= limits_.max_connections_per_address) {
        reject(fd, 429, "too many open connections from " + addr);
        continue;
      }
      ++open_;
      ++per_address_[addr];
    }
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->addr = addr;
    c->deadline = after(limits_.head_timeout_s);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    reading_[fd] = std::move(c);
  }
}

// Answers a connection that is not taken in, without reading it.
void Server::reject(int fd, int status, const std::string& message) {
  Response res;
  error_response(status, message, res);
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) +
                     "\r\nContent-Type: " + res.content_type + "\r\nContent-Length: " + std::to_string(res.body.size()) +
                     "\r\nConnection: close\r\n\r\n" + res.body;
  [[maybe_unused]] const ssize_t n = ::send(fd, head.data(), head.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(fd);
}

void Server::release_address(const std::string& addr) {
  // with mu_ held
  --open_;
  if (auto it = per_address_.find(addr); it != per_address_.end() && --it->second == 0) per_address_.erase(it);
}

void Server::close_connection(int fd) {
  auto it = reading_.find(fd);
  if (it == reading_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  {
    std::lock_guard<std::mutex> lock(mu_);
    release_address(it->second->addr);
  }
  reading_.erase(it);
}

void Server::on_readable(Connection& c) {
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      c.buf.append(chunk, static_cast<size_t>(n));
      // Never hold more than one request's worth unread.
      if (c.buf.size() > limits_.parser.max_head_bytes + limits_.parser.max_body_bytes + sizeof chunk) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.peer_closed = true;  // closed or reset by the client
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    return;
  }
}

// Moves a connection forward with what it has received: the head checked
// as soon as it is whole, the request handed on as soon as its body is.
void Server::advance(std::unique_ptr<Connection>& c) {
  const int fd = c->fd;
  if (!c->head_done) {
    const size_t from = c->scanned > 3 ? c->scanned - 3 : 0;
    if (find_head_end(c->buf, from) == std::string::npos) {
      c->scanned = c->buf.size();
      if (c->buf.size() > limits_.parser.max_head_bytes) {
        const std::string why = "the request head is larger than the server accepts";
        Response res;
        error_response(431, why, res);
        send_response(*c, nullptr, res, false, Clock::now());
        close_connection(fd);
      }
      return;
    }
  }
  ParseResult r = parse_request(c->buf, limits_.parser);
  switch (r.state) {
    case ParseResult::State::NeedMore: return;
    case ParseResult::State::Error: {
      Response res;
      error_response(r.status, r.message, res, r.request.path);
      send_response(*c, nullptr, res, false, Clock::now());  // framing is lost: the connection ends
      close_connection(fd);
      return;
    }
    case ParseResult::State::HeadComplete:
      if (!c->head_done) {
        c->head_done = true;
        c->need = r.head_bytes + r.body_bytes;
        c->deadline = after(limits_.body_timeout_s);
        const auto expect = r.request.header("expect");
        if (expect && expect->size() == 12 && ::strncasecmp(expect->data(), "100-continue", 12) == 0)
          send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", Clock::now());
      }
      return;
    case ParseResult::State::Complete: {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      std::unique_ptr<Connection> taken = std::move(c);
      reading_.erase(fd);
      dispatch(std::move(taken), std::move(r));
      return;
    }
  }
}

void Server::expire(Clock::time_point now) {
  std::vector<int> late;
  for (const auto& [fd, c] : reading_)
    if (c->deadline <= now) late.push_back(fd);
  for (int fd : late) {
    Connection& c = *reading_[fd];
    if (!c.buf.empty()) {  // an idle keep-alive connection just closes
      Response res;
      error_response(408, c.head_done ? "the request body did not arrive in time" : "the request head did not arrive in time", res);
      send_response(c, nullptr, res, false, Clock::now());
    }
    close_connection(fd);
  }
}

void Server::adopt_returned() {
  std::vector<std::unique_ptr<Connection>> back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    back.swap(returned_);
  }
  for (auto& c : back) {
    const int fd = c->fd;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    reading_[fd] = std::move(c);
    advance(reading_[fd]);  // a pipelined request may be partly here already
  }
}

void Server::dispatch(std::unique_ptr<Connection> c, ParseResult parsed) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (handlers_ >= limits_.max_handlers) {
      Response res;
      error_response(503, "the server is answering too many requests", res);
      send_response(*c, &parsed.request, res, false, Clock::now());
      ::close(c->fd);
      release_address(c->addr);
      return;
    }
    ++handlers_;
    handled_fds_.insert(c->fd);
  }
  std::thread([this, c = std::move(c), parsed = std::move(parsed)]() mutable {
    serve(std::move(c), std::move(parsed));
  }).detach();
}

// On a request's own thread: answers it and the complete requests pipelined
// behind it, then gives the connection back to the loop or closes it.
void Server::serve(std::unique_ptr<Connection> c, ParseResult parsed) {
  bool keep = true;
  while (keep) {
    Request& req = parsed.request;
    const int fd = c->fd;
    req.remote_addr = c->addr;
    req.client_gone = [fd] { return peer_gone(fd); };
    c->buf.erase(0, parsed.consumed);
    Response res;
    answer(*c, req, res);
    keep = send_response(*c, &req, res, req.keep_alive() && !stopping_, after(limits_.write_timeout_s));
    if (logger_) logger_(req, res);
    if (!keep) break;
    parsed = parse_request(c->buf, limits_.parser);
    if (parsed.state != ParseResult::State::Complete) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  handled_fds_.erase(c->fd);
  if (keep && !stopping_) {
    c->scanned = 0;
    c->head_done = false;
    c->deadline = after(limits_.head_timeout_s);
    returned_.push_back(std::move(c));
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  } else {
    ::close(c->fd);
    release_address(c->addr);
  }
  if (--handlers_ == 0) idle_.notify_all();
}

void Server::answer(Connection&, const Request& req, Response& res) {
  try {
    if (pre_routing_ && pre_routing_(req, res)) return;
    bool path_known = false;
    for (const Route& r : routes_) {
      const bool match = r.prefix ? req.path.rfind(r.path, 0) == 0 : req.path == r.path;
      if (!match) continue;
      path_known = true;
      if (r.method != req.method) continue;
      r.handler(req, res);
      return;
    }
    if (path_known) {
      error_response(405, "method " + req.method + " is not allowed on " + req.path, res, req.path);
      std::string allow;
      for (const Route& r : routes_)
        if (r.prefix ? req.path.rfind(r.path, 0) == 0 : req.path == r.path) allow += (allow.empty() ? "" : ", ") + r.method;
      res.set_header("Allow", allow);
    } else {
      error_response(404, "no such endpoint: " + req.method + " " + req.path, res, req.path);
    }
  } catch (const std::exception& e) {
    res = Response();
    error_response(500, e.what(), res, req.path);
  }
}

void Server::error_response(int status, const std::string& message, Response& res, std::string_view path) {
  res.status = status;
  if (error_body_) error_body_(status, message, path, res);
  else res.set_content(message + "\n", "text/plain; charset=utf-8");
}

// Sends the answer; true when it went out whole and the connection stays open.
// `deadline` bounds a whole body; each write of a stream gets its own.
bool Server::send_response(Connection& c, const Request* req, Response& res, bool keep_alive,
                           Clock::time_point deadline) {
  const bool streamed = static_cast<bool>(res.stream) && res.status < 400;
  const bool http11 = req == nullptr || req->minor_version >= 1;
  // A stream to an HTTP/1.0 client has no chunked encoding: it ends when the connection does.
  const bool chunked = streamed && http11;
  if (streamed && !http11) keep_alive = false;
  std::string head = "HTTP/1.1 " + std::to_string(res.status) + " " + std::string(reason_phrase(res.status)) + "\r\n";
  head += "Content-Type: " + res.content_type + "\r\n";
  if (chunked) head += "Transfer-Encoding: chunked\r\n";
  else if (!streamed) head += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  for (const auto& [k, v] : res.headers) head += k + ": " + v + "\r\n";
  head += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  const bool head_only = req && req->method == "HEAD";
  if (!streamed) return send_all(c.fd, head_only ? head : head + res.body, deadline) && keep_alive;
  if (!send_all(c.fd, head, deadline)) return false;
  Sink sink(c.fd, chunked, limits_.write_timeout_s);
  try {
    res.stream(sink);
  } catch (const std::exception&) {
    return false;  // the head is out: all that can be said is that the stream ends early
  }
  return sink.finish() && keep_alive;
}

}  // namespace lily::http
