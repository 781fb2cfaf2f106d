#include "lily/router/audit_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "lily/error.h"

namespace lily::router {

using json = nlohmann::ordered_json;

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

AuditLog::AuditLog(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd_ < 0) throw Error("cannot open the audit log " + path + ": " + std::strerror(errno));
}

AuditLog::~AuditLog() {
  if (fd_ >= 0) ::close(fd_);
}

void AuditLog::write(json line) {
  std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  // One write per line: O_APPEND puts it whole at the end.
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("cannot write the audit log " + path_ + ": " + std::strerror(errno));
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fdatasync(fd_);  // an egress record must outlive a crash that follows it
}

void AuditLog::decision(const std::string& id, const std::string& api, const Classification& c, const Decision& d) {
  json findings = json::array();
  for (const Finding& f : c.findings)
    findings.push_back({{"category", f.category.empty() ? json(nullptr) : json(f.category)},
                        {"kind", f.kind},
                        {"where", f.where}});
  write({{"event", "decision"},
         {"time", utc_now()},
         {"request", id},
         {"api", api},
         {"route", route_name(d.route)},
         {"rule", d.rule},
         {"categories", json(std::vector<std::string>(c.categories.begin(), c.categories.end()))},
         {"findings", findings}});
}

void AuditLog::egress(const std::string& id, const std::string& destination, const EgressResult& r,
                      const std::string& outcome) {
  write({{"event", "egress"},
         {"time", utc_now()},
         {"request", id},
         {"destination", destination},
         {"bytes_sent", r.bytes_sent},
         {"bytes_received", r.bytes_received},
         {"status", r.status},
         {"error", r.error.empty() ? json(nullptr) : json(r.error)},
         {"outcome", outcome}});
}

}  // namespace lily::router
