// The hybrid routing policy at work in the server: classifies each request,
// decides where it runs, writes the audit log, and makes the outbound call
// for the requests the policy lets out. The server asks it before answering;
// it holds everything the policy remembers between requests.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "lily/router/audit_log.h"
#include "lily/router/classifier.h"
#include "lily/router/deployment_config.h"
#include "lily/router/egress.h"
#include "lily/router/policy.h"

namespace lily::router {

struct Routed {
  std::string id;  // the request's id in the audit log
  Classification classification;
  Decision decision;
};

class HybridRouter {
 public:
  // `audit_path` empty: no audit log. Throws lily::Error for a cloud tier it
  // cannot use (its key's variable unset, https without TLS, a bad CA file).
  HybridRouter(DeploymentConfig config, const std::string& audit_path);

  // Classifies and decides; the decision is in the audit log before this
  // returns. Throws lily::Error for a malformed routing field of the request.
  Routed route(const nlohmann::ordered_json& body, const std::string& route_header, const std::string& api,
               bool cloud_capable);

  // Starts the outbound call for a request routed to the cloud: `body` goes
  // out with the cloud tier's model name and without Lily's own fields.
  std::unique_ptr<EgressCall> start_cloud(const Routed& r, nlohmann::ordered_json body) const;
  // Records a finished (or failed) outbound call; `outcome` says what the server did.
  void finish_cloud(const Routed& r, const EgressCall& call, const std::string& outcome);

  const DeploymentConfig& config() const { return config_; }
  std::string destination() const { return egress_ ? egress_->destination() : ""; }

  struct Counts {
    uint64_t local = 0, cloud = 0, cloud_failed = 0, fallback_local = 0, bytes_sent = 0, bytes_received = 0;
  };
  Counts counts() const;
  void count_fallback() { ++fallback_local_; }

 private:
  DeploymentConfig config_;
  QuoteMemory memory_;
  Classifier classifier_;
  std::unique_ptr<Egress> egress_;
  std::unique_ptr<AuditLog> audit_;
  std::atomic<uint64_t> next_id_{1}, local_{0}, cloud_{0}, cloud_failed_{0}, fallback_local_{0}, bytes_sent_{0},
      bytes_received_{0};
  std::string id_prefix_;
};

}  // namespace lily::router
