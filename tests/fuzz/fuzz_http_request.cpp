// Bytes from a client, as the HTTP server reads them.
#include <cstdlib>

#include "fuzz_support.h"
#include "lily/server/http/request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lily::http::ParserLimits limits;
  limits.max_body_bytes = 1 << 16;
  const auto r = lily::http::parse_request(lily::fuzz::text(data, size), limits);
  using S = lily::http::ParseResult::State;
  if (r.state == S::Complete && (r.consumed > size || r.request.body.size() != r.body_bytes)) std::abort();
  if (r.state == S::Error && (r.status < 400 || r.status > 599)) std::abort();
  if (r.state == S::Complete) r.request.keep_alive();
  return 0;
}
