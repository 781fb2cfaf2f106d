#include "lily/router/policy.h"

namespace lily::router {

const char* route_name(Route r) { return r == Route::Cloud ? "cloud" : "local"; }

Decision decide(const Classification& c, const DeploymentConfig& config, bool cloud_capable) {
  for (const std::string& cat : c.categories)
    if (config.routes_local(cat)) return {Route::Local, "routeLocal: the request carries " + cat + " data"};
  if (c.client_asked_local) return {Route::Local, "the request asked to stay local"};
  if (c.categories.empty()) return {Route::Local, "unclassified: egress is denied by default"};
  for (const std::string& cat : c.categories)
    if (!config.routes_cloud(cat))
      return {Route::Local, "the category " + cat + " is in neither list: egress is denied by default"};
  if (!config.has_cloud) return {Route::Local, "no cloud tier is configured"};
  if (!cloud_capable) return {Route::Local, "this API is served locally (the cloud tier speaks Chat Completions)"};
  std::string cats;
  for (const std::string& cat : c.categories) cats += (cats.empty() ? "" : ", ") + cat;
  return {Route::Cloud, "routeCloud: every category found is cloud-eligible (" + cats + ")"};
}

}  // namespace lily::router
