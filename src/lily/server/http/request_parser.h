// Reads HTTP/1.x requests out of the bytes a connection has received so
// far, within limits on the request line, the headers and the body. The
// parser only looks at bytes: it never waits, so a slow client costs the
// server nothing but the deadline the connection is held to.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "lily/server/http/message.h"

namespace lily::http {

struct ParserLimits {
  size_t max_head_bytes = 64 << 10;  // request line and headers together
  size_t max_headers = 100;
  size_t max_body_bytes = size_t(16) << 20;
};

struct ParseResult {
  enum class State {
    NeedMore,      // the request is not complete yet
    HeadComplete,  // head read, body still arriving (`request` has the head; `body_bytes` is expected)
    Complete,      // `request` is whole; `consumed` bytes of the input were its own
    Error,         // answer `status` with `message`, then close (`request.path` is set once the request line was read)
  } state = State::NeedMore;
  Request request;
  size_t consumed = 0;
  size_t head_bytes = 0;  // from the start of the input to the end of the head
  size_t body_bytes = 0;
  int status = 0;
  std::string message;
};

// Where the head that starts at the beginning of `data` ends (just past the
// blank line), searching from `from`; npos while it has not arrived.
size_t find_head_end(std::string_view data, size_t from = 0);

// Parses the request at the start of `data`. Pure: the same input gives the
// same result, so a connection calls it again as more bytes arrive.
ParseResult parse_request(std::string_view data, const ParserLimits& limits);

}  // namespace lily::http
