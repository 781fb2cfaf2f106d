// The HTTP/1.1 server under `lily serve`. One thread reads every connection
// without blocking and holds each to a deadline for its head and one for its
// body, so slow or idle clients cost a socket, never a thread; a request is
// handed to a thread of its own only once it has fully arrived. Connections
// are capped in total and per client address, kept alive, and pipelined
// requests are answered in order. Nothing here knows what the routes do.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lily/server/http/message.h"
#include "lily/server/http/request_parser.h"

namespace lily::http {

struct ServerLimits {
  size_t max_connections = 1024;              // open at once (also kept below the descriptor limit)
  size_t max_connections_per_address = 256;   // open at once from one client address
  double head_timeout_s = 10;                 // connection (or previous answer) to a complete head
  double body_timeout_s = 60;                 // complete head to complete body
  double write_timeout_s = 60;                // a write waiting for the client to read
  size_t max_handlers = 1024;                 // requests being answered at once
  ParserLimits parser;
};

using Handler = std::function<void(const Request&, Response&)>;

class Server {
 public:
  explicit Server(ServerLimits limits = {});
  ~Server();

  // `path` ending in '*' matches every path with that prefix.
  void route(const std::string& method, const std::string& path, Handler handler);
  // Runs before routing; returns true when it has answered the request itself.
  void set_pre_routing(std::function<bool(const Request&, Response&)> f) { pre_routing_ = std::move(f); }
  // Fills the body of an error the server answers itself (404, 405, 408, 413, 500, ...).
  // `path`: the request's path where it is known (empty where the request
  // could not be read), so an error can take the shape its API expects.
  void set_error_body(std::function<void(int status, const std::string& message, std::string_view path, Response&)> f) {
    error_body_ = std::move(f);
  }
  // Called after each answer is sent.
  void set_logger(std::function<void(const Request&, const Response&)> f) { logger_ = std::move(f); }

  // Binds and listens (port 0: any free port); returns the port. Throws lily::Error.
  int bind(const std::string& host, int port);
  // Serves until stop(); then ends every connection and waits for the
  // requests being answered to finish.
  void run();
  // Safe from any thread and from a signal handler.
  void stop();
  bool running() const { return running_; }

 private:
  struct Connection;
  void accept_all();
  void on_readable(Connection& c);
  void advance(std::unique_ptr<Connection>& c);
  void close_connection(int fd);
  void reject(int fd, int status, const std::string& message);
  void expire(std::chrono::steady_clock::time_point now);
  void adopt_returned();
  void dispatch(std::unique_ptr<Connection> c, ParseResult parsed);
  void serve(std::unique_ptr<Connection> c, ParseResult parsed);
  void answer(Connection& c, const Request& req, Response& res);
  bool send_response(Connection& c, const Request* req, Response& res, bool keep_alive,
                     std::chrono::steady_clock::time_point deadline);
  void error_response(int status, const std::string& message, Response& res, std::string_view path = {});
  void release_address(const std::string& addr);

  ServerLimits limits_;
  struct Route {
    std::string method, path;
    bool prefix;
    Handler handler;
  };
  std::vector<Route> routes_;
  std::function<bool(const Request&, Response&)> pre_routing_;
  std::function<void(int, const std::string&, std::string_view, Response&)> error_body_;
  std::function<void(const Request&, const Response&)> logger_;

  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> running_{false}, stopping_{false};
  std::map<int, std::unique_ptr<Connection>> reading_;  // owned by the loop thread

  std::mutex mu_;  // guards what follows
  std::condition_variable idle_;
  std::vector<std::unique_ptr<Connection>> returned_;  // kept alive by handlers, back to the loop
  std::set<int> handled_fds_;                         // connections a handler holds
  std::map<std::string, size_t> per_address_;
  size_t open_ = 0, handlers_ = 0;
};

}  // namespace lily::http
