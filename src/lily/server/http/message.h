// An HTTP/1.x request as the server hands it to a route, and the response a
// route gives back: whole, or streamed through a sink the route writes to.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lily::http {

struct Request {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoding is left to routes; none of ours needs it
  std::string query;
  int minor_version = 1;  // HTTP/1.0 or HTTP/1.1
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  std::string remote_addr;
  // True once the client has closed or reset the connection: a long
  // computation for a client that left stops.
  std::function<bool()> client_gone = [] { return false; };

  // The first header of that name (case-insensitive), if any.
  std::optional<std::string_view> header(std::string_view name) const;
  // Whether the connection may carry another request after this one.
  bool keep_alive() const;
};

// What a streaming route writes to. Each write is sent at once (as a chunk
// on HTTP/1.1); a write fails once the client has gone.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual bool write(std::string_view data) = 0;
  // True once the client has closed its side or reset the connection.
  virtual bool client_gone() = 0;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type = "application/json";
  std::string body;
  // Set for a streamed body: called after the head is sent, on the request's thread.
  std::function<void(StreamSink&)> stream;

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
};

std::string_view reason_phrase(int status);

}  // namespace lily::http
