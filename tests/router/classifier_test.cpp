// The detectors and the classifier: each kind of secret and file sign is
// found, also encoded and split; ordinary text is not; tool results are
// classified by their tool and remembered, so a later quote is caught.
#include "lily/router/classifier.h"

#include <gtest/gtest.h>

#include "lily/error.h"

namespace lily::router {
namespace {

using json = nlohmann::ordered_json;

std::set<std::string> kinds(std::string_view text) {
  std::vector<Finding> f;
  scan_text(text, "t", f);
  std::set<std::string> k;
  for (const Finding& x : f) k.insert(x.kind);
  return k;
}

TEST(Detectors, FindEachKindOfCredential) {
  const std::pair<const char*, const char*> cases[] = {
      {"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----", "private_key"},
      {"id AKIAIOSFODNN7EXAMPLE here", "aws_access_key_id"},
      {"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key"},
      {"ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"},
      {"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv", "github_token"},
      {"glpat-abcdefghij0123456789", "gitlab_token"},
      {"sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "anthropic_api_key"},
      {"sk-proj-abcdefghijklmnopqrstuvwxyz012345", "openai_api_key"},
      {"AIzaSyA-abcdefghijklmnopqrstuvwxyz0123456", "google_api_key"},
      {"xoxb-1234567890-abcdefghij", "slack_token"},
      {"sk_live_abcdefghijklmnop1234", "stripe_key"},
      {"hf_abcdefghijklmnopqrstuvwxyzABCDEF", "huggingface_token"},
      {"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.abcdefghijklmnop", "jwt"},
      {"mongodb://admin:s3cretpass@cluster0.example.net/db", "connection_string"},
      {"\"password\": \"hunter2hunter2\"", "password_assignment"},
      {"export STRIPE_SECRET_KEY=abcdef123456", "env_secret"},
      {"Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "bearer_token"},
      {"see /home/alice/.ssh/config", "unix_path"},
      {"open C:\\Users\\alice\\Documents\\plan.docx", "windows_path"},
      {"in src/lily/server/http_server.cpp line 4", "file_reference"},
      {"cat .env please", "dotfile_reference"},
      {"#!/usr/bin/env python3\nprint(1)", "shebang"},
      {"```\nline one\nline two\n```", "code_block"},
      {"#include <stdio.h>\nint main() {}", "source_code"},
  };
  for (const auto& [text, kind] : cases) EXPECT_TRUE(kinds(text).count(kind)) << kind << " in: " << text;
}

TEST(Detectors, FindSecretsInsideBase64AndHex) {
  const std::string key = "AKIAIOSFODNN7EXAMPLE and more text";
  std::string b64;  // standard base64 of the key
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < key.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(key[i]) << 16;
    if (i + 1 < key.size()) v |= static_cast<unsigned char>(key[i + 1]) << 8;
    if (i + 2 < key.size()) v |= static_cast<unsigned char>(key[i + 2]);
    b64 += alphabet[(v >> 18) & 63];
    b64 += alphabet[(v >> 12) & 63];
    b64 += i + 1 < key.size() ? alphabet[(v >> 6) & 63] : '=';
    b64 += i + 2 < key.size() ? alphabet[v & 63] : '=';
  }
  std::vector<Finding> f;
  scan_text("blob: " + b64, "t", f);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "aws_access_key_id");
  EXPECT_EQ(f[0].where, "t (base64)");
  std::string hex;
  for (unsigned char c : key) {
    hex += "0123456789abcdef"[c >> 4];
    hex += "0123456789abcdef"[c & 15];
  }
  EXPECT_TRUE(kinds("x " + hex + " y").count("aws_access_key_id"));
}

TEST(Detectors, OrdinaryTextIsNotSecret) {
  for (const char* text : {"What is the weather in Paris today?", "The password policy changed last year.",
                           "Search the web for the latest Rust release notes.", "https://example.com/home/page"})
    EXPECT_TRUE(kinds(text).empty()) << text << ": " << *kinds(text).begin();
}

TEST(Classifier, ToolsCallsResultsAndQuotes) {
  const DeploymentConfig config = parse_deployment_config(
      R"({"hybridRouting": {"routeLocal": ["file_system"], "routeCloud": ["web_search"],
                            "cloud": {"baseUrl": "http://x", "model": "m"}}})",
      "d.json");
  QuoteMemory memory;
  Classifier classifier(config, memory);
  const std::string passage =
      "The launch date moved to the ninth of March because the supplier of the casing parts is late again";
  const json first = json::parse(R"({"messages": [
      {"role": "user", "content": "read it"},
      {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": ")" +
                                 passage + R"("}]}]})");
  const Classification a = classifier.classify(first, "");
  EXPECT_TRUE(a.categories.count("file_system"));
  bool result = false;
  for (const Finding& f : a.findings) result |= f.kind == "result of tool read_file" && f.where == "messages[2]";
  EXPECT_TRUE(result);
  // A later request quotes part of it, re-wrapped, with only a web tool.
  const json later = {{"messages", {{{"role", "user"}, {"content", "news about: moved to the ninth of\n  March because "
                                                                   "the supplier of the casing parts is late"}}}},
                      {"tools", {{{"type", "function"}, {"function", {{"name", "web_search"}}}}}}};
  const Classification b = classifier.classify(later, "");
  EXPECT_TRUE(b.categories.count("file_system"));
  EXPECT_TRUE(b.categories.count("web_search"));
  // Anthropic's and the Responses API's shapes of the same.
  const json messages_api = json::parse(R"({"messages": [
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]})");
  EXPECT_TRUE(classifier.classify(messages_api, "").categories.count("file_system"));
  const json responses_api = json::parse(R"({"input": [
      {"type": "function_call", "call_id": "r1", "name": "list_directory", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "r1", "output": "a.txt"}]})");
  EXPECT_TRUE(classifier.classify(responses_api, "").categories.count("file_system"));
}

TEST(Classifier, SplitKeysAndTheClientsOwnWishes) {
  DeploymentConfig config = parse_deployment_config("{}", "d.json");
  QuoteMemory memory;
  Classifier classifier(config, memory);
  const json split = {{"messages",
                       {{{"role", "user"}, {"content", "first half: ghp_abcdefghijklmn"}},
                        {{"role", "user"}, {"content", "opqrstuvwxyz0123456789 second half"}}}}};
  const Classification s = classifier.classify(split, "");
  ASSERT_TRUE(s.categories.count("user_credentials"));
  EXPECT_EQ(s.findings.back().where, "across messages");
  const json asked = {{"messages", json::array()}, {"lily_routing", {{"route", "local"}, {"categories", {"personal_data"}}}}};
  const Classification c = classifier.classify(asked, "");
  EXPECT_TRUE(c.client_asked_local);
  EXPECT_TRUE(c.categories.count("personal_data"));
  EXPECT_TRUE(classifier.classify(json::object(), "local").client_asked_local);
  EXPECT_THROW(classifier.classify(json::object(), "cloud"), Error);
  EXPECT_THROW(classifier.classify({{"lily_routing", {{"route", "cloud"}}}}, ""), Error);
  EXPECT_THROW(classifier.classify({{"lily_routing", {{"categories", {"nope"}}}}}, ""), Error);
  EXPECT_THROW(classifier.classify({{"lily_routing", {{"via", "x"}}}}, ""), Error);
}

}  // namespace
}  // namespace lily::router
