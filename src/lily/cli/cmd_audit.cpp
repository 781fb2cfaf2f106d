// `lily audit --log FILE [--request ID]`: what the egress audit log of
// `lily serve --audit-log` says. Without --request, a summary: decisions by
// route, rule and category, and every destination with the bytes it was sent.
// With --request, one request's decision explained: the rule, each finding
// and where it was seen, and its outbound calls.
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "lily/cli/commands.h"
#include "lily/error.h"

namespace lily::cli {

namespace {

using json = nlohmann::json;

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

uint64_t num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

std::vector<json> read_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the audit log " + path);
  std::vector<json> lines;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || str(j, "event").empty()) {
      std::cerr << "lily audit: " << path << " line " << n << " is not an audit record (skipped)\n";
      continue;
    }
    lines.push_back(std::move(j));
  }
  return lines;
}

int summary(const std::vector<json>& log) {
  std::map<std::string, uint64_t> routes, rules, categories;
  struct Dest {
    uint64_t calls = 0, failed = 0, sent = 0, received = 0;
  };
  std::map<std::string, Dest> dests;
  uint64_t decisions = 0;
  for (const json& j : log) {
    if (str(j, "event") == "decision") {
      ++decisions;
      ++routes[str(j, "route")];
      ++rules[str(j, "rule")];
      if (j.contains("categories") && j["categories"].is_array())
        for (const json& c : j["categories"])
          if (c.is_string()) ++categories[c.get<std::string>()];
    } else if (str(j, "event") == "egress") {
      Dest& d = dests[str(j, "destination")];
      ++d.calls;
      d.sent += num(j, "bytes_sent");
      d.received += num(j, "bytes_received");
      if (j.contains("error") && !j["error"].is_null()) ++d.failed;
    }
  }
  std::cout << decisions << " routed requests\n";
  for (const auto& [route, n] : routes) std::cout << "  " << route << ": " << n << "\n";
  std::cout << "rules that decided:\n";
  for (const auto& [rule, n] : rules) std::cout << "  " << n << "  " << rule << "\n";
  std::cout << "data categories found (requests):\n";
  if (categories.empty()) std::cout << "  none\n";
  for (const auto& [c, n] : categories) std::cout << "  " << c << ": " << n << "\n";
  std::cout << "outbound calls:\n";
  if (dests.empty()) std::cout << "  none: nothing left this machine\n";
  for (const auto& [dest, d] : dests)
    std::cout << "  " << dest << ": " << d.calls << " calls (" << d.failed << " failed), " << d.sent
              << " bytes sent, " << d.received << " bytes received\n";
  return 0;
}

int explain(const std::vector<json>& log, const std::string& id) {
  bool found = false;
  for (const json& j : log) {
    if (str(j, "request") != id) continue;
    found = true;
    if (str(j, "event") == "decision") {
      std::cout << "request " << id << " (" << str(j, "api") << ", " << str(j, "time") << ")\n"
                << "  route: " << str(j, "route") << "\n  rule:  " << str(j, "rule") << "\n  findings:\n";
      const json& f = j.contains("findings") ? j["findings"] : json::array();
      if (!f.is_array() || f.empty()) std::cout << "    none (nothing in the request was classified)\n";
      if (f.is_array())
        for (const json& x : f)
          std::cout << "    " << (x.contains("category") && x["category"].is_string() ? x["category"].get<std::string>()
                                                                                       : std::string("-"))
                    << ": " << str(x, "kind") << " at " << (str(x, "where").empty() ? "the body" : str(x, "where"))
                    << "\n";
    } else if (str(j, "event") == "egress") {
      std::cout << "  outbound call to " << str(j, "destination") << " at " << str(j, "time") << ": "
                << num(j, "bytes_sent") << " bytes sent, " << num(j, "bytes_received") << " received, status "
                << num(j, "status");
      if (j.contains("error") && j["error"].is_string()) std::cout << ", error: " << j["error"].get<std::string>();
      std::cout << "\n  outcome: " << str(j, "outcome") << "\n";
    }
  }
  if (!found) throw Error("the audit log has no request with the id '" + id + "'");
  return 0;
}

}  // namespace

Command add_audit_command(CLI::App& app) {
  struct Opts {
    std::string log, request;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("audit", "summarise the egress audit log of lily serve --audit-log");
  sub->add_option("--log", o->log, "the audit log (JSON lines)")->required();
  sub->add_option("--request", o->request, "explain the decision for this request id");
  return {sub, [o]() {
            const std::vector<json> log = read_log(o->log);
            return o->request.empty() ? summary(log) : explain(log, o->request);
          }};
}

}  // namespace lily::cli
