#include "lily/router/classifier.h"

#include <algorithm>
#include <cctype>

#include "lily/error.h"
#include "lily/router/json_member.h"

namespace lily::router {

using json = nlohmann::ordered_json;

void Classification::add(Finding f) {
  for (const Finding& g : findings)
    if (g.category == f.category && g.kind == f.kind && g.where == f.where) return;
  categories.insert(f.category);
  findings.push_back(std::move(f));
}

// ---------------------------------------------------------------- quote memory

namespace {

constexpr size_t kWindow = 48;     // characters of normalized text a quote must share
constexpr size_t kStoreStep = 16;  // stored windows start every kStoreStep characters
constexpr uint64_t kBase = 1099511628211ull;

// Whitespace runs become one space, so re-indented or re-wrapped quotes still match.
std::string normalize(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (unsigned char c : text) {
    if (std::isspace(c)) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(static_cast<char>(c));
  }
  return out;
}

uint64_t window_hash(const std::string& s, size_t at) {
  uint64_t h = 0;
  for (size_t i = 0; i < kWindow; ++i) h = h * kBase + static_cast<unsigned char>(s[at + i]);
  return h;
}

}  // namespace

void QuoteMemory::remember(const std::string& text, const std::string& category) {
  const std::string s = normalize(text);
  if (s.size() < kWindow) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto add = [&](size_t at) {
    const uint64_t h = window_hash(s, at);
    if (windows_.emplace(h, category).second) order_.push_back(h);
  };
  for (size_t at = 0; at + kWindow <= s.size(); at += kStoreStep) add(at);
  add(s.size() - kWindow);
  while (order_.size() > max_) {
    windows_.erase(order_.front());
    order_.pop_front();
  }
}

std::string QuoteMemory::quoted_in(const std::string& text) const {
  const std::string s = normalize(text);
  if (s.size() < kWindow) return "";
  std::lock_guard<std::mutex> lock(mu_);
  if (windows_.empty()) return "";
  // Rolling hash over every window: a quote of kWindow + kStoreStep characters
  // always contains one whole stored window.
  uint64_t top = 1;
  for (size_t i = 1; i < kWindow; ++i) top *= kBase;
  uint64_t h = window_hash(s, 0);
  for (size_t at = 0;; ++at) {
    if (auto it = windows_.find(h); it != windows_.end()) return it->second;
    if (at + kWindow >= s.size()) return "";
    h = (h - top * static_cast<unsigned char>(s[at])) * kBase + static_cast<unsigned char>(s[at + kWindow]);
  }
}

// ---------------------------------------------------------------- classifier

namespace {

std::string string_member(const json& j, const char* key) {
  const json* v = member(j, key);
  return v && v->is_string() ? v->get<std::string>() : "";
}

// The text of a message's content or a tool result: a string, or the text of its parts.
void collect_text(const json& v, std::string& out) {
  if (v.is_string()) {
    out += v.get<std::string>();
  } else if (v.is_array()) {
    for (const json& x : v) collect_text(x, out);
  } else if (v.is_object()) {
    for (const char* k : {"text", "content", "output"})
      if (const json* x = member(v, k)) collect_text(*x, out);
  }
}

// Tool calls anywhere in the body, in any API's shape: id -> tool name.
void collect_calls(const json& v, std::unordered_map<std::string, std::string>& calls) {
  if (v.is_array()) {
    for (const json& x : v) collect_calls(x, calls);
    return;
  }
  if (!v.is_object()) return;
  std::string name = string_member(v, "name");
  if (const json* f = member(v, "function"); f && f->is_object() && name.empty()) name = string_member(*f, "name");
  const std::string id = !string_member(v, "call_id").empty() ? string_member(v, "call_id") : string_member(v, "id");
  if (!name.empty() && !id.empty()) calls[id] = name;
  for (auto it = v.begin(); it != v.end(); ++it) collect_calls(*it, calls);
}

struct Walk {
  const DeploymentConfig& config;
  QuoteMemory& memory;
  const std::unordered_map<std::string, std::string>& calls;
  Classification& out;
  std::string joined;  // message text in order, for the detectors that work across messages

  void tool(const std::string& name, const std::string& how, const std::string& where) {
    const std::string cat = config.category_of_tool(name);
    if (!cat.empty()) out.add({cat, how + " " + name, where});
  }

  // A tool result: classified by the tool that produced it, and remembered
  // so that a later quote of it is classified the same way.
  void result(const json& v, const std::string& id, const std::string& where) {
    auto it = calls.find(id);
    const std::string name = it != calls.end() ? it->second : "";
    const std::string cat = name.empty() ? "" : config.category_of_tool(name);
    if (cat.empty()) return;
    out.add({cat, "result of tool " + name, where});
    if (!config.routes_cloud(cat)) {
      std::string text;
      collect_text(v, text);
      memory.remember(text, cat);
    }
  }

  void string(const std::string& s, const std::string& where) {
    if (s.size() >= 6) {
      std::vector<Finding> found;
      scan_text(s, where, found);
      for (Finding& f : found) out.add(std::move(f));
    }
    if (const std::string cat = memory.quoted_in(s); !cat.empty())
      out.add({cat, "quotes an earlier " + cat + " tool result", where});
  }

  // `named`: the parent object already counted this object's tool name.
  void value(const json& v, const std::string& where, bool in_tools, bool named = false) {
    if (v.is_string()) return string(v.get<std::string>(), where);
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) value(v[i], where + "[" + std::to_string(i) + "]", in_tools);
      return;
    }
    if (!v.is_object()) return;
    const std::string type = string_member(v, "type"), role = string_member(v, "role");
    // Declared tools (any API) and tool calls in the history.
    std::string name = string_member(v, "name");
    if (const json* f = member(v, "function"); f && f->is_object()) name = string_member(*f, "name");
    const bool call_shape = type == "function_call" || type == "tool_use" || member(v, "function") != nullptr ||
                            type == "function" || type == "custom";
    const bool names_tool = !name.empty() && (in_tools || call_shape) && !named;
    if (names_tool) tool(name, in_tools ? "declares tool" : "calls tool", where);
    // Tool results: Chat Completions, Responses and Messages.
    if (role == "tool") result(v, string_member(v, "tool_call_id"), where);
    if (type == "function_call_output") result(v, string_member(v, "call_id"), where);
    if (type == "tool_result") result(v, string_member(v, "tool_use_id"), where);
    // Attached files.
    if (type == "file" || type == "input_file" || type == "document")
      out.add({"file_system", "attached file", where});
    if (role == "user" || role == "tool" || role == "assistant" || role == "system" || role == "developer")
      if (const json* c = member(v, "content")) collect_text(*c, joined);
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() == "model" || it.key() == "role" || it.key() == "lily_routing") continue;
      value(*it, where.empty() ? it.key() : where + "." + it.key(), in_tools || it.key() == "tools",
            names_tool && it.key() == "function");
    }
  }
};

void client_request(const json& body, const std::string& header, Classification& out) {
  auto route = [&](const std::string& r, const std::string& where) {
    if (r == "local") {
      out.client_asked_local = true;
      out.findings.push_back({"", "the request asked to stay local", where});
    } else if (r != "auto" && !r.empty()) {
      throw Error(where + " must be 'local' or 'auto' (a request can make routing stricter, never looser)");
    }
  };
  route(header, "the x-lily-route header");
  const json* r = member(body, "lily_routing");
  if (!r || r->is_null()) return;
  if (!r->is_object()) throw Error("'lily_routing' must be an object with 'route' and/or 'categories'");
  for (auto it = r->begin(); it != r->end(); ++it)
    if (it.key() != "route" && it.key() != "categories")
      throw Error("'lily_routing': unknown key '" + it.key() + "' (known: route, categories)");
  if (const json* v = member(*r, "route")) {
    if (!v->is_string()) throw Error("'lily_routing.route' must be a string");
    route(v->get<std::string>(), "'lily_routing.route'");
  }
  if (const json* cats = member(*r, "categories")) {
    if (!cats->is_array()) throw Error("'lily_routing.categories' must be an array of data categories");
    for (const json& c : *cats) {
      if (!c.is_string() || !is_category(c.get<std::string>()))
        throw Error("'lily_routing.categories' holds '" + (c.is_string() ? c.get<std::string>() : c.dump()) +
                    "', which is not a data category");
      out.add({c.get<std::string>(), "named by the request", "lily_routing.categories"});
    }
  }
}

}  // namespace

Classification Classifier::classify(const json& body, const std::string& route_header) const {
  Classification out;
  client_request(body, route_header, out);
  std::unordered_map<std::string, std::string> calls;
  collect_calls(body, calls);
  Walk walk{config_, memory_, calls, out, {}};
  walk.value(body, "", false);
  std::string squeezed;
  squeezed.reserve(walk.joined.size());
  for (unsigned char c : walk.joined)
    if (!std::isspace(c)) squeezed.push_back(static_cast<char>(c));
  std::vector<Finding> joined;
  scan_joined(squeezed, "across messages", joined);
  for (Finding& f : joined)  // only what no single string showed: a value split between pieces
    if (std::none_of(out.findings.begin(), out.findings.end(), [&](const Finding& g) { return g.kind == f.kind; }))
      out.add(std::move(f));
  return out;
}

}  // namespace lily::router
