// The append-only egress audit log (`lily serve --audit-log FILE`): one JSON
// line per event. A "decision" line for every routed request (its id, time,
// API, route, the rule that decided, the categories and the findings, never
// the data itself), and an "egress" line for every outbound call (the
// destination, the bytes sent and received, the status or the error).
// Lines are written whole with O_APPEND, so concurrent requests and several
// server runs never interleave within a line, and nothing is ever rewritten.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "lily/router/classifier.h"
#include "lily/router/egress.h"
#include "lily/router/policy.h"

namespace lily::router {

class AuditLog {
 public:
  // Opens (creating, mode 0600) for appending; throws lily::Error naming the path.
  explicit AuditLog(const std::string& path);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  void decision(const std::string& request_id, const std::string& api, const Classification& c, const Decision& d);
  void egress(const std::string& request_id, const std::string& destination, const EgressResult& r,
              const std::string& outcome);

 private:
  void write(nlohmann::ordered_json line);
  std::mutex mu_;
  int fd_ = -1;
  std::string path_;
};

// ISO 8601 UTC time with milliseconds.
std::string utc_now();

}  // namespace lily::router
