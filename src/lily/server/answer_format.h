// One answer in the shape of one API. The server drives every API the same
// way: it hands each event of the job (text as it comes, then the end) to the
// format, which keeps the answer so far and, for a streamed request, gives
// the bytes to send for that event (Server-Sent Events or NDJSON lines). A
// whole answer is asked for once the end has gone through.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lily/runtime/scheduler.h"
#include "lily/server/api_error.h"

namespace lily::server {

class AnswerFormat {
 public:
  virtual ~AnswerFormat() = default;
  // The stream's bytes for `ev` (possibly none); the first call also opens
  // the stream, the Done event also closes it.
  virtual std::string frames(const JobEvent& ev) = 0;
  // The bytes that end a stream that failed after it began.
  virtual std::string error_frames(const ApiError& e) = 0;
  // The whole answer, after the Done event went through frames().
  virtual nlohmann::ordered_json whole(const JobEvent& done) = 0;
  virtual const char* stream_content_type() const { return "text/event-stream"; }
};

// One Server-Sent Event; `event` may be empty (a bare data line).
std::string sse_event(const std::string& event, const nlohmann::ordered_json& data);

// Seconds since the epoch, and an RFC 3339 time in UTC with nanoseconds.
int64_t unix_seconds();
std::string rfc3339_now();

}  // namespace lily::server
