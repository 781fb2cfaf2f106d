#include "lily/net/http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "lily/error.h"

#ifdef LILY_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

namespace lily::net {

using Clock = std::chrono::steady_clock;

std::string HttpResult::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (n == name) return v;
  return "";
}

struct HttpClient::Tls {
#ifdef LILY_HAVE_OPENSSL
  SSL_CTX* ctx = nullptr;
  ~Tls() {
    if (ctx) SSL_CTX_free(ctx);
  }
#endif
};

namespace {

#ifdef LILY_HAVE_OPENSSL
std::string tls_error() {
  const unsigned long e = ERR_get_error();
  if (!e) return "TLS error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}
#endif

// One connection: a socket, and a TLS session over it for https. Every wait
// ends at the call's deadline, or earlier when nothing has moved for the
// idle bound.
class Connection {
 public:
  explicit Connection(const HttpLimits& limits)
      : deadline_(limits.timeout_s > 0 ? Clock::now() + to_duration(limits.timeout_s) : Clock::time_point::max()),
        idle_(limits.idle_timeout_s > 0 ? to_duration(limits.idle_timeout_s) : Clock::duration::max()),
        last_progress_(Clock::now()) {}
  ~Connection() {
#ifdef LILY_HAVE_OPENSSL
    if (ssl_) SSL_free(ssl_);
#endif
    if (fd_ >= 0) ::close(fd_);
  }

  // Empty on success, else why not.
  std::string connect(const std::string& host, int port) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_UNSPEC;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) return "cannot resolve " + host + ": " + gai_strerror(rc);
    std::string why = "no address";
    for (addrinfo* a = res; a; a = a->ai_next) {
      fd_ = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd_ < 0) continue;
      ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
      if (::connect(fd_, a->ai_addr, a->ai_addrlen) == 0 || (errno == EINPROGRESS && wait(POLLOUT) && connected())) {
        ::freeaddrinfo(res);
        return "";
      }
      why = std::string("cannot connect to ") + host + ":" + std::to_string(port) + ": " +
            (timed_out() ? "timed out" : std::strerror(errno));
      ::close(fd_);
      fd_ = -1;
    }
    ::freeaddrinfo(res);
    return why;
  }

#ifdef LILY_HAVE_OPENSSL
  std::string handshake(SSL_CTX* ctx, const std::string& host) {
    ssl_ = SSL_new(ctx);
    if (!ssl_) return tls_error();
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, host.c_str());
    SSL_set1_host(ssl_, host.c_str());  // the certificate must name this host
    for (;;) {
      const int rc = SSL_connect(ssl_);
      if (rc == 1) return "";
      const int e = SSL_get_error(ssl_, rc);
      if ((e == SSL_ERROR_WANT_READ && wait(POLLIN)) || (e == SSL_ERROR_WANT_WRITE && wait(POLLOUT))) continue;
      if (timed_out()) return "TLS handshake timed out";
      const long verify = SSL_get_verify_result(ssl_);
      if (verify != X509_V_OK) return std::string("certificate not trusted: ") + X509_verify_cert_error_string(verify);
      return "TLS handshake failed: " + tls_error();
    }
  }
#endif

  bool write_all(std::string_view data, uint64_t& counted) {
    while (!data.empty()) {
      const long n = write_some(data);
      if (n <= 0) return false;
      counted += static_cast<uint64_t>(n);
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Up to `cap` bytes; 0 at the end of the stream, -1 on error or timeout.
  long read_some(char* buf, size_t cap) {
    for (;;) {
#ifdef LILY_HAVE_OPENSSL
      if (ssl_) {
        const int n = SSL_read(ssl_, buf, static_cast<int>(cap));
        if (n > 0) return progressed(n);
        const int e = SSL_get_error(ssl_, n);
        if (e == SSL_ERROR_ZERO_RETURN) return 0;
        if ((e == SSL_ERROR_WANT_READ && wait(POLLIN)) || (e == SSL_ERROR_WANT_WRITE && wait(POLLOUT))) continue;
        // A peer that closes without close_notify still ends the body it framed.
        return e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 ? 0 : -1;
      }
#endif
      const ssize_t n = ::recv(fd_, buf, cap, 0);
      if (n >= 0) return progressed(n);
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait(POLLIN)) continue;
      if (errno == EINTR) continue;
      return -1;
    }
  }

  bool timed_out() const { return Clock::now() >= next_deadline(); }
  bool past_whole_deadline() const { return Clock::now() >= deadline_; }

 private:
  static Clock::duration to_duration(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(s, 1e9)));
  }

  long progressed(long n) {
    if (n > 0) last_progress_ = Clock::now();
    return n;
  }

  Clock::time_point next_deadline() const {
    if (idle_ == Clock::duration::max()) return deadline_;
    return std::min(deadline_, last_progress_ + idle_);
  }

  long write_some(std::string_view data) {
    for (;;) {
#ifdef LILY_HAVE_OPENSSL
      if (ssl_) {
        const int n = SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 20)));
        if (n > 0) return progressed(n);
        const int e = SSL_get_error(ssl_, n);
        if ((e == SSL_ERROR_WANT_READ && wait(POLLIN)) || (e == SSL_ERROR_WANT_WRITE && wait(POLLOUT))) continue;
        return -1;
      }
#endif
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) return progressed(n);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait(POLLOUT)) continue;
      if (n < 0 && errno == EINTR) continue;
      return -1;
    }
  }

  bool wait(short events) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline() - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    return rc > 0;
  }

  bool connected() const {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return false;
    errno = err;  // for the caller's message
    return err == 0;
  }

  Clock::time_point deadline_;
  Clock::duration idle_;
  Clock::time_point last_progress_;
  int fd_ = -1;
#ifdef LILY_HAVE_OPENSSL
  SSL* ssl_ = nullptr;
#endif
};

std::string human_size(uint64_t bytes) {
  return bytes >= (uint64_t(1) << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

// Reads the HTTP answer: status line and headers, then the body (length,
// chunked, or until the peer closes), passing body bytes to `on_data`.
class AnswerReader {
 public:
  AnswerReader(Connection& c, HttpResult& r, const HttpLimits& limits) : c_(c), r_(r), limits_(limits) {}
  void set_sink(const std::function<bool(std::string_view)>* on_data) { on_data_ = on_data; }

  std::string head() {
    std::string head;
    while (head.find("\r\n\r\n") == std::string::npos) {
      if (head.size() > limits_.max_head_bytes) return "the answer's headers exceed " + human_size(limits_.max_head_bytes);
      if (!fill()) return c_.timed_out() ? "timed out waiting for the answer" : "the connection closed before an answer";
      head += buf_;
      buf_.clear();
    }
    const size_t end = head.find("\r\n\r\n");
    buf_ = head.substr(end + 4);
    head.resize(end);
    if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12 || !std::isdigit(static_cast<unsigned char>(head[9])))
      return "the answer is not HTTP/1.x";
    r_.status = std::atoi(head.c_str() + 9);
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos) {
      const size_t next = head.find("\r\n", pos + 2);
      std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon), value = line.substr(colon + 1);
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
        if (name == "transfer-encoding" && value.find("chunked") != std::string::npos) chunked_ = true;
        if (name == "content-length") {
          char* e = nullptr;
          const long long n = std::strtoll(value.c_str(), &e, 10);
          if (value.empty() || *e != '\0' || n < 0) return "the answer's Content-Length is not a number";
          length_ = n;
        }
        if (name == "content-type") r_.content_type = value;
        r_.headers.emplace_back(std::move(name), std::move(value));
      }
      pos = next;
    }
    return "";
  }

  std::string body() { return chunked_ ? read_chunked() : read_plain(length_); }

 private:
  bool fill() {
    char tmp[65536];
    const long n = c_.read_some(tmp, sizeof tmp);
    if (n <= 0) return false;
    r_.bytes_received += static_cast<uint64_t>(n);
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  bool deliver(std::string_view data) {
    delivered_ += data.size();
    if (delivered_ > limits_.max_body_bytes) return false;
    return (*on_data_)(data);
  }

  std::string read_plain(int64_t length) {
    if (length > 0 && static_cast<uint64_t>(length) > limits_.max_body_bytes)
      return "the answer exceeds " + human_size(limits_.max_body_bytes);
    uint64_t left = length < 0 ? UINT64_MAX : static_cast<uint64_t>(length);
    for (;;) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(left, buf_.size()));
      if (take && !deliver(std::string_view(buf_).substr(0, take))) return stop_reason();
      buf_.erase(0, take);
      left -= take;
      if (left == 0) return "";
      if (!fill()) return length < 0 && !c_.timed_out() ? "" : "the answer ended early";
    }
  }

  std::string read_chunked() {
    for (;;) {
      size_t eol;
      while ((eol = buf_.find("\r\n")) == std::string::npos)
        if (buf_.size() > 1024 || !fill()) return "a malformed chunked answer";
      // The size is hex digits, optionally followed by ";extensions".
      if (eol == 0 || !std::isxdigit(static_cast<unsigned char>(buf_[0]))) return "a malformed chunked answer";
      char* end = nullptr;
      const uint64_t size = std::strtoull(buf_.c_str(), &end, 16);
      if (end != buf_.c_str() + eol && *end != ';' && *end != ' ') return "a malformed chunked answer";
      buf_.erase(0, eol + 2);
      if (size == 0) return "";
      if (size > limits_.max_body_bytes) return "a chunk larger than the answer limit";
      // Large chunks are passed on as they arrive, not gathered whole.
      uint64_t left = size;
      while (left > 0) {
        if (buf_.empty() && !fill()) return "the answer ended early";
        const size_t take = static_cast<size_t>(std::min<uint64_t>(left, buf_.size()));
        if (!deliver(std::string_view(buf_).substr(0, take))) return stop_reason();
        buf_.erase(0, take);
        left -= take;
      }
      while (buf_.size() < 2)
        if (!fill()) return "the answer ended early";
      if (buf_.compare(0, 2, "\r\n") != 0) return "a malformed chunked answer";
      buf_.erase(0, 2);
    }
  }

  std::string stop_reason() const {
    return delivered_ > limits_.max_body_bytes ? "the answer exceeds " + human_size(limits_.max_body_bytes)
                                               : "";  // "" : the caller stopped
  }

  Connection& c_;
  HttpResult& r_;
  HttpLimits limits_;
  const std::function<bool(std::string_view)>* on_data_ = nullptr;
  std::string buf_;
  uint64_t delivered_ = 0;
  bool chunked_ = false;
  int64_t length_ = -1;
};

}  // namespace

HttpClient::HttpClient(const std::string& ca_file) : tls_(std::make_unique<Tls>()) {
#ifdef LILY_HAVE_OPENSSL
  tls_->ctx = SSL_CTX_new(TLS_client_method());
  if (!tls_->ctx) throw Error("cannot set up TLS: " + tls_error());
  SSL_CTX_set_min_proto_version(tls_->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(tls_->ctx, SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_set_default_verify_paths(tls_->ctx) != 1) throw Error("cannot load the system's CA certificates");
  if (!ca_file.empty() && SSL_CTX_load_verify_locations(tls_->ctx, ca_file.c_str(), nullptr) != 1)
    throw Error("cannot read the CA certificates in " + ca_file + ": " + tls_error());
#else
  if (!ca_file.empty()) throw Error("this build of Lily has no TLS (OpenSSL was not found at build time): " + ca_file + " cannot be used");
#endif
}

HttpClient::~HttpClient() = default;

bool HttpClient::has_tls() {
#ifdef LILY_HAVE_OPENSSL
  return true;
#else
  return false;
#endif
}

struct HttpCall::State {
  explicit State(const HttpLimits& l) : limits(l), connection(l) {}
  HttpLimits limits;
  Connection connection;
  std::unique_ptr<AnswerReader> reader;
};

HttpCall::HttpCall() = default;
HttpCall::~HttpCall() = default;

namespace {
std::string timeout_message(const Connection& c, const HttpLimits& l) {
  if (c.past_whole_deadline()) return "timed out after " + std::to_string(l.timeout_s) + " s";
  return "no progress for " + std::to_string(l.idle_timeout_s) + " s";
}
}  // namespace

bool HttpCall::read_body(const std::function<bool(std::string_view)>& on_data) {
  if (!s_ || !s_->reader) return false;
  s_->reader->set_sink(&on_data);
  r_.error = s_->reader->body();
  if (!r_.error.empty() && s_->connection.timed_out()) r_.error = timeout_message(s_->connection, s_->limits);
  s_.reset();  // the connection closes here
  return r_.error.empty();
}

std::unique_ptr<HttpCall> HttpClient::start(const std::string& method, const Url& url, const Headers& headers,
                                            std::string_view body, const HttpLimits& limits) const {
  std::unique_ptr<HttpCall> call(new HttpCall());
  HttpResult& r = call->r_;
  call->s_ = std::make_unique<HttpCall::State>(limits);
  Connection& c = call->s_->connection;
  auto fail = [&](std::string why) {
    r.error = std::move(why);
    call->s_.reset();
    return std::move(call);
  };
  if (url.https && !has_tls())
    return fail("this build of Lily has no TLS (OpenSSL was not found at build time): " + url.origin() +
                " cannot be reached");
  if (std::string why = c.connect(url.host, url.port); !why.empty()) return fail(why);
#ifdef LILY_HAVE_OPENSSL
  if (url.https)
    if (std::string why = c.handshake(tls_->ctx, url.host); !why.empty()) return fail(why);
#endif
  std::string head = method + " " + url.target + " HTTP/1.1\r\nHost: " + url.authority() +
                     "\r\nConnection: close\r\nUser-Agent: lily\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& [name, value] : headers) {
    // A header value from outside (a token) must not end the header early.
    if (value.find_first_of("\r\n") != std::string::npos || name.find_first_of("\r\n:") != std::string::npos)
      return fail("the header " + name + " holds a line break");
    head += name + ": " + value + "\r\n";
  }
  head += "\r\n";
  if (!c.write_all(head, r.bytes_sent) || !c.write_all(body, r.bytes_sent))
    return fail(c.timed_out() ? "timed out sending the request" : "the connection closed while sending the request");
  call->s_->reader = std::make_unique<AnswerReader>(c, r, limits);
  if (std::string why = call->s_->reader->head(); !why.empty())
    return fail(c.timed_out() ? timeout_message(c, limits) : why);
  return call;
}

}  // namespace lily::net
