// One member of a JSON object, or null when it is absent or the value is not
// an object: the router reads request bodies and deployment files whose
// shape is not to be trusted.
#pragma once

#include <nlohmann/json.hpp>

namespace lily::router {

inline const nlohmann::ordered_json* member(const nlohmann::ordered_json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

}  // namespace lily::router
