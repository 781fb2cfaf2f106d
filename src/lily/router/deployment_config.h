// The deployment file of `lily serve --deployment-config FILE`: which
// engine serves, and the hybrid routing policy that decides, per request,
// whether it may leave the machine for a cloud tier (any OpenAI-compatible
// endpoint) or must be computed here. Read strictly: an unknown key, an
// unknown data category or a value of the wrong type is an error that names it.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lily::router {

// The kinds of data a request can carry. The local ones are what the engine
// exists to keep on the machine; the web ones are public by nature.
inline constexpr const char* kCategories[] = {"file_system", "source_code", "user_credentials", "personal_data",
                                              "web_search",  "citation_index"};
bool is_category(const std::string& name);

struct CloudTier {
  std::string base_url;      // e.g. https://vllm.example:8000/v1 (its /chat/completions is called)
  std::string model;         // the model name sent to it
  std::string api_key_env;   // the environment variable that holds its key (never logged)
  std::string ca_file;       // extra CA certificates (PEM) to trust, for a private deployment
};

enum class CloudFailure { Local, Error };

struct DeploymentConfig {
  std::string engine = "lily-cpu";  // lily-cpu, lily-cuda or lily (the GPU when there is one)
  std::string model;                // informational: the model the deployment means
  double memory_allocation_gb = 0;  // 0: not set (the server's own --memory-gb rules)
  bool has_routing = false;  // the file has a hybridRouting section
  std::vector<std::string> route_local, route_cloud;
  bool has_cloud = false;
  CloudTier cloud;
  // (tool name or glob pattern, category); the user's entries first, then the defaults
  std::vector<std::pair<std::string, std::string>> tool_categories;
  CloudFailure on_cloud_failure = CloudFailure::Local;
  double cloud_timeout_s = 60;

  // The category of a tool by its name (first matching pattern), or "".
  std::string category_of_tool(const std::string& tool) const;
  bool routes_local(const std::string& category) const;
  bool routes_cloud(const std::string& category) const;
};

// Parses and checks the file's text; `source` names it in errors. Throws
// lily::Error naming the offending key or value.
DeploymentConfig parse_deployment_config(const std::string& text, const std::string& source);
DeploymentConfig load_deployment_config(const std::string& path);

// Shell-style glob: `*` any run, `?` one character.
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace lily::router
