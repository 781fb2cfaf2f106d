#include "lily/router/deployment_config.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "lily/error.h"
#include "lily/router/json_member.h"
#include "lily/io/bounded_input.h"

namespace lily::router {

using json = nlohmann::ordered_json;

namespace {

// Tools whose names say what they touch, as the common coding agents and
// MCP servers name them. A user's toolCategories entries come before these.
const std::pair<const char*, const char*> kDefaultToolCategories[] = {
    {"read_file", "file_system"},     {"write_file", "file_system"},   {"edit_file", "file_system"},
    {"list_directory", "file_system"}, {"list_dir", "file_system"},     {"read_*", "file_system"},
    {"grep", "file_system"},          {"glob", "file_system"},         {"search_files", "file_system"},
    {"find_files", "file_system"},    {"file_*", "file_system"},       {"fs_*", "file_system"},
    {"bash", "file_system"},          {"shell", "file_system"},        {"run_command", "file_system"},
    {"execute_command", "file_system"}, {"git_*", "source_code"},      {"code_*", "source_code"},
    {"get_secret", "user_credentials"}, {"*credential*", "user_credentials"}, {"*password*", "user_credentials"},
    {"*secret*", "user_credentials"}, {"query_database", "personal_data"}, {"sql_*", "personal_data"},
    {"*contacts*", "personal_data"},  {"*calendar*", "personal_data"}, {"*email*", "personal_data"},
    {"web_search", "web_search"},     {"search_web", "web_search"},    {"web_fetch", "web_search"},
    {"fetch_url", "web_search"},      {"browse*", "web_search"},       {"*citation*", "citation_index"},
    {"cite_*", "citation_index"},
};

void only_keys(const json& obj, const std::string& where, std::initializer_list<const char*> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* k) { return it.key() == k; })) {
      std::string list;
      for (const char* k : allowed) list += std::string(list.empty() ? "" : ", ") + k;
      throw Error(where + ": unknown key '" + it.key() + "' (known: " + list + ")");
    }
  }
}

std::string string_of(const json& obj, const char* key, const std::string& where, bool required) {
  const json* v = member(obj, key);
  if (!v) {
    if (required) throw Error(where + "." + key + " is required");
    return "";
  }
  if (!v->is_string()) throw Error(where + "." + key + " must be a string");
  return v->get<std::string>();
}

std::string category_list() {
  std::string s;
  for (const char* c : kCategories) s += std::string(s.empty() ? "" : ", ") + c;
  return s;
}

void check_category(const std::string& c, const std::string& where) {
  if (!is_category(c)) throw Error(where + ": unknown data category '" + c + "' (known: " + category_list() + ")");
}

std::vector<std::string> categories_of(const json& obj, const char* key, const std::string& where) {
  std::vector<std::string> out;
  const json* v = member(obj, key);
  if (!v) return out;
  if (!v->is_array()) throw Error(where + "." + key + " must be an array of data categories");
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
    if (!(*v)[i].is_string()) throw Error(at + " must be a string");
    check_category((*v)[i].get<std::string>(), at);
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

double seconds_of(const json& obj, const char* key, const std::string& where, double fallback) {
  const json* v = member(obj, key);
  if (!v) return fallback;
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= 0 || v->get<double>() > 86400)
    throw Error(where + "." + key + " must be a number of seconds above 0 and at most 86400");
  return v->get<double>();
}

CloudTier cloud_of(const json& c, const std::string& where) {
  if (!c.is_object()) throw Error(where + " must be an object");
  only_keys(c, where, {"baseUrl", "model", "apiKeyEnv", "caFile"});
  CloudTier t;
  t.base_url = string_of(c, "baseUrl", where, true);
  if (t.base_url.rfind("http://", 0) != 0 && t.base_url.rfind("https://", 0) != 0)
    throw Error(where + ".baseUrl must start with http:// or https:// (got '" + t.base_url + "')");
  while (!t.base_url.empty() && t.base_url.back() == '/') t.base_url.pop_back();
  t.model = string_of(c, "model", where, true);
  t.api_key_env = string_of(c, "apiKeyEnv", where, false);
  t.ca_file = string_of(c, "caFile", where, false);
  return t;
}

}  // namespace

bool is_category(const std::string& name) {
  return std::any_of(std::begin(kCategories), std::end(kCategories), [&](const char* c) { return name == c; });
}

bool glob_match(const std::string& pattern, const std::string& text) {
  // Iterative matching with one backtrack point: linear in practice, never exponential.
  size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p, ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, mark = t;
    } else if (star != std::string::npos) {
      p = star + 1, t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string DeploymentConfig::category_of_tool(const std::string& tool) const {
  for (const auto& [pattern, category] : tool_categories)
    if (glob_match(pattern, tool)) return category;
  return "";
}

bool DeploymentConfig::routes_local(const std::string& c) const {
  return std::find(route_local.begin(), route_local.end(), c) != route_local.end();
}

bool DeploymentConfig::routes_cloud(const std::string& c) const {
  return std::find(route_cloud.begin(), route_cloud.end(), c) != route_cloud.end();
}

DeploymentConfig parse_deployment_config(const std::string& text, const std::string& source) {
  const json root = parse_ordered_json(text, source);
  if (!root.is_object()) throw Error(source + ": the deployment file must be a JSON object");
  only_keys(root, source, {"engine", "model", "hybridRouting", "memoryAllocationGB"});
  DeploymentConfig c;
  if (member(root, "engine")) {
    c.engine = string_of(root, "engine", source, true);
    if (c.engine != "lily-cpu" && c.engine != "lily-cuda" && c.engine != "lily")
      throw Error(source + ".engine: unknown engine '" + c.engine + "' (known: lily-cpu, lily-cuda, lily)");
  }
  c.model = string_of(root, "model", source, false);
  if (const json* m = member(root, "memoryAllocationGB")) {
    if (!m->is_number() || !std::isfinite(m->get<double>()) || m->get<double>() <= 0)
      throw Error(source + ".memoryAllocationGB must be a positive number of gigabytes");
    c.memory_allocation_gb = m->get<double>();
  }
  for (const auto& [pattern, category] : kDefaultToolCategories) c.tool_categories.emplace_back(pattern, category);
  const json* hr = member(root, "hybridRouting");
  if (!hr) return c;
  const std::string where = source + ".hybridRouting";
  if (!hr->is_object()) throw Error(where + " must be an object");
  c.has_routing = true;
  only_keys(*hr, where,
            {"routeLocal", "routeCloud", "cloud", "toolCategories", "onCloudFailure", "cloudTimeoutSeconds"});
  c.route_local = categories_of(*hr, "routeLocal", where);
  c.route_cloud = categories_of(*hr, "routeCloud", where);
  for (const std::string& cat : c.route_cloud)
    if (c.routes_local(cat))
      throw Error(where + ": the category '" + cat + "' is in both routeLocal and routeCloud");
  if (const json* cloud = member(*hr, "cloud")) {
    c.cloud = cloud_of(*cloud, where + ".cloud");
    c.has_cloud = true;
  }
  if (!c.route_cloud.empty() && !c.has_cloud)
    throw Error(where + ": routeCloud names categories but there is no cloud tier (hybridRouting.cloud)");
  if (const json* tc = member(*hr, "toolCategories")) {
    if (!tc->is_object())
      throw Error(where + ".toolCategories must be an object of tool name or pattern -> data category");
    std::vector<std::pair<std::string, std::string>> user;
    for (auto it = tc->begin(); it != tc->end(); ++it) {
      const std::string at = where + ".toolCategories." + it.key();
      if (it.key().empty()) throw Error(where + ".toolCategories: a tool name is empty");
      if (!it->is_string()) throw Error(at + " must be a data category (a string)");
      check_category(it->get<std::string>(), at);
      user.emplace_back(it.key(), it->get<std::string>());
    }
    c.tool_categories.insert(c.tool_categories.begin(), user.begin(), user.end());
  }
  const std::string failure = string_of(*hr, "onCloudFailure", where, false);
  if (failure == "error")
    c.on_cloud_failure = CloudFailure::Error;
  else if (!failure.empty() && failure != "local")
    throw Error(where + ".onCloudFailure must be 'local' or 'error' (got '" + failure + "')");
  c.cloud_timeout_s = seconds_of(*hr, "cloudTimeoutSeconds", where, c.cloud_timeout_s);
  return c;
}

DeploymentConfig load_deployment_config(const std::string& path) {
  return parse_deployment_config(read_regular_file(path, size_t(1) << 20), path);
}

}  // namespace lily::router
