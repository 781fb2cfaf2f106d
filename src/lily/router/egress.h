// The only code in Lily that sends request data off the machine: HTTP/1.1
// POSTs to the deployment's cloud tier (an OpenAI-compatible endpoint)
// through the outbound client (net/http_client: TLS with certificate and host
// name verification for https:// URLs, byte counts for the egress audit log,
// bounded time and answer size). It never logs the API key.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lily/net/http_client.h"
#include "lily/router/deployment_config.h"

namespace lily::router {

// The outcome of a call to the cloud tier and its byte counts (the audit log's).
using EgressResult = net::HttpResult;
// One call in flight: the answer's head is read; its body with read_body.
using EgressCall = net::HttpCall;

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
  net::Url base_;
  std::string api_key_;
  double timeout_s_;
  std::unique_ptr<net::HttpClient> client_;
};

}  // namespace lily::router
