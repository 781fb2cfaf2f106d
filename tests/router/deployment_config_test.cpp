// The deployment file: the issue's example reads as written, and every kind
// of mistake is an error that names the key or value at fault.
#include "lily/router/deployment_config.h"

#include <gtest/gtest.h>

#include "lily/error.h"
#include "lily/router/policy.h"

namespace lily::router {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_deployment_config(text, "d.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeploymentConfig, ReadsTheDocumentedExample) {
  const DeploymentConfig c = parse_deployment_config(R"({
    "engine": "lily-cpu", "model": "Qwen3.6-35B-A3B",
    "hybridRouting": {"routeLocal": ["file_system", "user_credentials"], "routeCloud": ["web_search", "citation_index"],
                      "cloud": {"baseUrl": "https://vllm.example:8000/v1/", "model": "Qwen3.6-397B", "apiKeyEnv": "K"},
                      "toolCategories": {"my_notes_*": "personal_data"}, "onCloudFailure": "error",
                      "cloudTimeoutSeconds": 12.5},
    "memoryAllocationGB": 28.5})",
                                                     "d.json");
  EXPECT_EQ(c.engine, "lily-cpu");
  EXPECT_DOUBLE_EQ(c.memory_allocation_gb, 28.5);
  EXPECT_TRUE(c.has_routing && c.has_cloud);
  EXPECT_EQ(c.cloud.base_url, "https://vllm.example:8000/v1");  // the trailing slash goes
  EXPECT_EQ(c.on_cloud_failure, CloudFailure::Error);
  EXPECT_DOUBLE_EQ(c.cloud_timeout_s, 12.5);
  EXPECT_TRUE(c.routes_local("file_system") && c.routes_cloud("web_search") && !c.routes_cloud("file_system"));
  EXPECT_EQ(c.category_of_tool("my_notes_search"), "personal_data");  // the user's patterns first
  EXPECT_EQ(c.category_of_tool("read_file"), "file_system");          // then the defaults
  EXPECT_EQ(c.category_of_tool("list_directory"), "file_system");
  EXPECT_EQ(c.category_of_tool("grep"), "file_system");
  EXPECT_EQ(c.category_of_tool("web_search"), "web_search");
  EXPECT_EQ(c.category_of_tool("get_weather"), "");
}

TEST(DeploymentConfig, MistakesAreNamed) {
  EXPECT_NE(error_of(R"({"engin": "lily-cpu"})").find("unknown key 'engin'"), std::string::npos);
  EXPECT_NE(error_of(R"({"engine": "vllm"})").find("unknown engine 'vllm'"), std::string::npos);
  EXPECT_NE(error_of(R"({"hybridRouting": {"routeLocal": ["files"]}})").find("unknown data category 'files'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hybridRouting": {"routeLocal": ["web_search"], "routeCloud": ["web_search"],
                        "cloud": {"baseUrl": "http://x", "model": "m"}}})")
                .find("in both routeLocal and routeCloud"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hybridRouting": {"routeCloud": ["web_search"]}})").find("no cloud tier"), std::string::npos);
  EXPECT_NE(error_of(R"({"hybridRouting": {"cloud": {"baseUrl": "ftp://x", "model": "m"}}})").find("http://"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hybridRouting": {"cloud": {"baseUrl": "http://x"}}})").find("cloud.model is required"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hybridRouting": {"cloud": {"baseUrl": "http://x", "model": "m", "key": "s"}}})")
                .find("unknown key 'key'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hybridRouting": {"toolCategories": {"x": "secret_stuff"}}})").find("'secret_stuff'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hybridRouting": {"onCloudFailure": "retry"}})").find("'local' or 'error'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hybridRouting": {"cloudTimeoutSeconds": -1}})").find("cloudTimeoutSeconds"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"memoryAllocationGB": "lots"})").find("memoryAllocationGB"), std::string::npos);
  EXPECT_NE(error_of("[1]").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of("{").find("d.json"), std::string::npos);
}

TEST(DeploymentConfig, GlobMatching) {
  EXPECT_TRUE(glob_match("read_*", "read_file"));
  EXPECT_TRUE(glob_match("*secret*", "get_secret_value"));
  EXPECT_TRUE(glob_match("a?c", "abc"));
  EXPECT_FALSE(glob_match("a?c", "abbc"));
  EXPECT_FALSE(glob_match("read_*", "thread_x"));
  // A hostile pattern stays linear.
  EXPECT_FALSE(glob_match(std::string(200, '*') + "b", std::string(100000, 'a')));
}

TEST(Policy, LocalWinsAndEgressIsDeniedByDefault) {
  DeploymentConfig c = parse_deployment_config(
      R"({"hybridRouting": {"routeLocal": ["file_system"], "routeCloud": ["web_search"],
                            "cloud": {"baseUrl": "http://x", "model": "m"}}})",
      "d.json");
  Classification none, web, both, other, asked;
  web.add({"web_search", "declares tool web_search", "tools[0]"});
  both = web;
  both.add({"file_system", "declares tool read_file", "tools[1]"});
  other = web;
  other.add({"personal_data", "named by the request", "lily_routing.categories"});
  asked = web;
  asked.client_asked_local = true;
  EXPECT_EQ(decide(none, c, true).route, Route::Local);
  EXPECT_NE(decide(none, c, true).rule.find("denied by default"), std::string::npos);
  EXPECT_EQ(decide(web, c, true).route, Route::Cloud);
  EXPECT_EQ(decide(web, c, false).route, Route::Local);  // an API the cloud tier does not speak
  EXPECT_EQ(decide(both, c, true).route, Route::Local);
  EXPECT_EQ(decide(other, c, true).route, Route::Local);
  EXPECT_EQ(decide(asked, c, true).route, Route::Local);
  c.has_cloud = false;
  EXPECT_EQ(decide(web, c, true).route, Route::Local);
}

}  // namespace
}  // namespace lily::router
