#include "lily/router/hybrid_router.h"

#include <chrono>
#include <cstdio>

namespace lily::router {

using json = nlohmann::ordered_json;

HybridRouter::HybridRouter(DeploymentConfig config, const std::string& audit_path)
    : config_(std::move(config)), classifier_(config_, memory_) {
  if (config_.has_cloud) egress_ = std::make_unique<Egress>(config_.cloud, config_.cloud_timeout_s);
  if (!audit_path.empty()) audit_ = std::make_unique<AuditLog>(audit_path);
  // Ids unique across server runs that append to the same log.
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  char buf[32];
  std::snprintf(buf, sizeof buf, "req-%llx-",
                static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()));
  id_prefix_ = buf;
}

Routed HybridRouter::route(const json& body, const std::string& route_header, const std::string& api,
                           bool cloud_capable) {
  Routed r;
  r.id = id_prefix_ + std::to_string(next_id_++);
  r.classification = classifier_.classify(body, route_header);
  r.decision = decide(r.classification, config_, cloud_capable && egress_ != nullptr);
  if (audit_) audit_->decision(r.id, api, r.classification, r.decision);
  if (r.decision.route == Route::Local) ++local_;
  return r;
}

std::unique_ptr<EgressCall> HybridRouter::start_cloud(const Routed&, json body) const {
  body["model"] = config_.cloud.model;
  body.erase("lily_routing");
  return egress_->start("/chat/completions", body.dump(-1, ' ', false, json::error_handler_t::replace));
}

void HybridRouter::finish_cloud(const Routed& r, const EgressCall& call, const std::string& outcome) {
  const EgressResult& res = call.result();
  bytes_sent_ += res.bytes_sent;
  bytes_received_ += res.bytes_received;
  if (call.ok())
    ++cloud_;
  else
    ++cloud_failed_;
  if (audit_) audit_->egress(r.id, egress_->destination(), res, outcome);
}

HybridRouter::Counts HybridRouter::counts() const {
  return {local_.load(), cloud_.load(), cloud_failed_.load(), fallback_local_.load(), bytes_sent_.load(),
          bytes_received_.load()};
}

}  // namespace lily::router
