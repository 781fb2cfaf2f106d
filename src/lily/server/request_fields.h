// Reading one field of a request body, shared by every API's reader: a
// missing or null field is absent, and a field of the wrong type is a 400
// that names it ("messages[2].role").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lily/server/api_error.h"

namespace lily::server {

// The field, or null when it is missing or JSON null.
inline const nlohmann::ordered_json* field(const nlohmann::ordered_json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// A required string field of the object at `where`.
inline std::string string_field(const nlohmann::ordered_json& j, const char* name, const std::string& where) {
  const nlohmann::ordered_json* v = field(j, name);
  if (!v) throw bad_field(where + "." + name, "is required");
  if (!v->is_string()) throw bad_field(where + "." + name, "must be a string");
  return v->get<std::string>();
}

}  // namespace lily::server
