// Lily's one HTTP/1.1 client, for what it sends out: the cloud tier of
// hybrid routing (router/egress) and model downloads (hub/). Plain TCP or TLS
// (OpenSSL, where the build has it) with certificate and host name
// verification; one request per connection; the answer's head, size and
// time are bounded, and every byte sent and received is counted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lily/net/url.h"

namespace lily::net {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpResult {
  int status = 0;            // the HTTP status, 0 when no answer came
  std::string error;         // why the call failed (connection, TLS, timeout, framing), empty on an answer
  std::string content_type;  // of the answer
  Headers headers;           // of the answer, names in lower case
  uint64_t bytes_sent = 0;   // HTTP bytes written: request line, headers and body
  uint64_t bytes_received = 0;
  // The value of the first header with this (lower-case) name, "" when absent.
  std::string header(std::string_view name) const;
};

struct HttpLimits {
  double timeout_s = 60;        // the whole call, connection to the body's end (0: none)
  double idle_timeout_s = 0;    // the longest wait for any progress (0: only the whole-call bound)
  uint64_t max_body_bytes = uint64_t(64) << 20;
  size_t max_head_bytes = 64 << 10;
};

// One call in flight: the request is sent and the answer's head read; the
// body is read with read_body. The totals keep counting until it ends.
class HttpCall {
 public:
  ~HttpCall();
  const HttpResult& result() const { return r_; }
  bool ok() const { return r_.error.empty() && r_.status >= 200 && r_.status < 300; }
  // Passes the decoded body to `on_data` as it arrives (return false to stop);
  // false when the body could not be read whole (result().error says why).
  bool read_body(const std::function<bool(std::string_view)>& on_data);

 private:
  friend class HttpClient;
  struct State;
  HttpCall();
  HttpResult r_;
  std::unique_ptr<State> s_;
};

class HttpClient {
 public:
  // `ca_file`: extra trusted certificates (PEM) beside the system's. Throws
  // lily::Error when they cannot be read.
  explicit HttpClient(const std::string& ca_file = "");
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends the request and reads the answer's status and headers; never
  // throws (failures are in result()). Adds Host, Connection: close,
  // User-Agent and Content-Length (when there is a body).
  std::unique_ptr<HttpCall> start(const std::string& method, const Url& url, const Headers& headers,
                                  std::string_view body, const HttpLimits& limits) const;

  // Whether this build can speak TLS (https://).
  static bool has_tls();

 private:
  struct Tls;
  std::unique_ptr<Tls> tls_;
};

}  // namespace lily::net
