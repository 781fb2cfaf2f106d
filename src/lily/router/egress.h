// The only code in Lily that sends request data off the machine: HTTP/1.1
// POSTs to the deployment's cloud tier (an OpenAI-compatible endpoint), over
// TLS with certificate and host name verification for https:// URLs. It
// counts the bytes it sends and receives for the egress audit log, bounds
// the time and the size of the answer, and never logs the API key.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lily/router/deployment_config.h"

namespace lily::router {

struct EgressResult {
  int status = 0;            // the HTTP status, 0 when no answer came
  std::string error;         // why the call failed (connection, TLS, timeout), empty on an answer
  std::string content_type;  // of the answer
  uint64_t bytes_sent = 0;   // HTTP bytes written: request line, headers and body
  uint64_t bytes_received = 0;
};

// One call in flight: the request is sent and the answer's head read; the
// body is read with read_body. The totals keep counting until it ends.
class EgressCall {
 public:
  ~EgressCall();
  const EgressResult& result() const { return r_; }
  bool ok() const { return r_.error.empty() && r_.status >= 200 && r_.status < 300; }
  // Passes the decoded body to `on_data` as it arrives (return false to stop);
  // false when the body could not be read whole (result().error says why).
  bool read_body(const std::function<bool(std::string_view)>& on_data);

 private:
  friend class Egress;
  struct State;
  EgressCall();
  EgressResult r_;
  std::unique_ptr<State> s_;
};

class Egress {
 public:
  // Reads the API key from the environment variable the tier names and sets
  // up TLS. Throws lily::Error when the key's variable is unset, the URL is
  // malformed, or https is asked of a build without TLS.
  Egress(const CloudTier& tier, double timeout_s);
  ~Egress();
  Egress(const Egress&) = delete;
  Egress& operator=(const Egress&) = delete;

  // POSTs `body` (JSON) to the tier's base URL + `path` and reads the
  // answer's status and headers; never throws (failures are in result()).
  std::unique_ptr<EgressCall> start(const std::string& path, const std::string& body) const;

  // scheme://host:port/base, for logs (no key, no query).
  std::string destination() const;

  static constexpr uint64_t kMaxAnswerBytes = uint64_t(64) << 20;

 private:
  struct Tls;
  bool https_ = false;
  std::string host_, base_path_;
  int port_ = 0;
  std::string api_key_;
  double timeout_s_;
  std::unique_ptr<Tls> tls_;
};

}  // namespace lily::router
