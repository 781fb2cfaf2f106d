#include "lily/router/egress.h"

#include <cstdlib>

#include "lily/error.h"

namespace lily::router {

Egress::Egress(const CloudTier& tier, double timeout_s)
    : base_(net::Url::parse(tier.base_url, "the cloud tier's baseUrl")), timeout_s_(timeout_s) {
  if (!tier.api_key_env.empty()) {
    const char* key = std::getenv(tier.api_key_env.c_str());
    if (!key || !*key)
      throw Error("the cloud tier's key variable " + tier.api_key_env + " (hybridRouting.cloud.apiKeyEnv) is not set");
    api_key_ = key;
  }
  if (base_.https && !net::HttpClient::has_tls())
    throw Error("this build of Lily has no TLS (OpenSSL was not found at build time): the cloud tier cannot be https://");
  try {
    client_ = std::make_unique<net::HttpClient>(base_.https ? tier.ca_file : "");
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (hybridRouting.cloud.caFile)");
  }
  // The base's path is a prefix: "/v1" + "/chat/completions".
  if (!base_.target.empty() && base_.target.back() == '/') base_.target.pop_back();
}

Egress::~Egress() = default;

std::string Egress::destination() const { return base_.origin() + base_.target; }

std::unique_ptr<EgressCall> Egress::start(const std::string& path, const std::string& body) const {
  net::Url url = base_;
  url.target += path;
  net::Headers headers = {{"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}};
  if (!api_key_.empty()) headers.emplace_back("Authorization", "Bearer " + api_key_);
  net::HttpLimits limits;
  limits.timeout_s = timeout_s_;
  limits.max_body_bytes = kMaxAnswerBytes;
  return client_->start("POST", url, headers, body, limits);
}

}  // namespace lily::router
