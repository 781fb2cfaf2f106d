// The routing decision: where a classified request may be computed. Any
// category the deployment keeps local keeps it local; it may go to the cloud
// tier only when every category found is one the deployment sends there;
// anything unclassified stays local (egress is denied by default).
#pragma once

#include <string>

#include "lily/router/classifier.h"
#include "lily/router/deployment_config.h"

namespace lily::router {

enum class Route { Local, Cloud };
const char* route_name(Route r);

struct Decision {
  Route route = Route::Local;
  std::string rule;  // the rule that decided, in words, for the audit log and the client
};

// `cloud_capable`: the request's API can be relayed to the cloud tier.
Decision decide(const Classification& c, const DeploymentConfig& config, bool cloud_capable);

}  // namespace lily::router
