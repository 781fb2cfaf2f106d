#include "lily/server/answer_format.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace lily::server {

std::string sse_event(const std::string& event, const nlohmann::ordered_json& data) {
  std::string out;
  if (!event.empty()) out = "event: " + event + "\n";
  out += "data: " + data.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n\n";
  return out;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string rfc3339_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(ns % 1000000000));
  return buf;
}

}  // namespace lily::server
