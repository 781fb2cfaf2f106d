#include "lily/text/output_parser.h"

#include "lily/error.h"
#include "lily/io/bounded_input.h"

#include <cstdlib>

namespace lily {

using nlohmann::ordered_json;

namespace {
const std::string kThinkOpen = "<think>", kThinkClose = "</think>";
const std::string kCallOpen = "<tool_call>", kCallClose = "</tool_call>";

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_suffix(const std::string& s, const std::string& tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, tag, 0, n) == 0) return n;
  return 0;
}

std::string strip_one_newline(std::string v) {
  if (!v.empty() && v.front() == '\n') v.erase(0, 1);
  if (!v.empty() && v.back() == '\n') v.pop_back();
  return v;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}
}  // namespace

void ParsedDelta::append(const ParsedDelta& d) {
  reasoning += d.reasoning;
  content += d.content;
  tool_calls.insert(tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
}

OutputParser::OutputParser(bool in_reasoning, ordered_json tools)
    : mode_(in_reasoning ? Mode::Reasoning : Mode::Content), tools_(std::move(tools)) {}

ParsedDelta OutputParser::push(const std::string& text) {
  buf_ += text;
  ParsedDelta d;
  drain(d, false);
  return d;
}

ParsedDelta OutputParser::finish() {
  ParsedDelta d;
  drain(d, true);
  return d;
}

void OutputParser::drain(ParsedDelta& out, bool final) {
  while (!buf_.empty()) {
    if (mode_ == Mode::Reasoning) {
      const size_t close = buf_.find(kThinkClose);
      if (close != std::string::npos) {
        out.reasoning += buf_.substr(0, close);
        buf_.erase(0, close + kThinkClose.size());
        mode_ = Mode::Content;
        continue;
      }
      const size_t hold = final ? 0 : partial_suffix(buf_, kThinkClose);
      out.reasoning += buf_.substr(0, buf_.size() - hold);
      buf_.erase(0, buf_.size() - hold);
      return;
    }
    if (mode_ == Mode::Content) {
      if (!content_started_) {
        // newlines between </think> and the answer belong to neither
        const size_t k = buf_.find_first_not_of('\n');
        if (k == std::string::npos) {
          if (final) buf_.clear();
          return;
        }
        buf_.erase(0, k);
        content_started_ = true;
        if (buf_.compare(0, kThinkOpen.size(), kThinkOpen) == 0) {  // the model opened <think> itself
          buf_.erase(0, kThinkOpen.size());
          mode_ = Mode::Reasoning;
          content_started_ = false;
          continue;
        }
        if (!final && buf_.size() < kThinkOpen.size() && kThinkOpen.compare(0, buf_.size(), buf_) == 0) {
          content_started_ = false;  // could still become <think>
          return;
        }
      }
      if (after_call_) {
        // whitespace between consecutive calls is not content
        const size_t k = buf_.find_first_not_of(" \t\r\n");
        if (k == std::string::npos) {
          if (final) buf_.clear();
          return;
        }
        if (buf_.compare(k, kCallOpen.size(), kCallOpen) == 0) {
          buf_.erase(0, k);
        } else if (!final && buf_.size() - k < kCallOpen.size() && kCallOpen.compare(0, buf_.size() - k, buf_, k) == 0) {
          return;  // could still be the next call
        }
        after_call_ = false;
      }
      const size_t open = buf_.find(kCallOpen);
      if (open != std::string::npos) {
        out.content += buf_.substr(0, open);
        buf_.erase(0, open);
        mode_ = Mode::ToolCall;
        continue;
      }
      const size_t hold = final ? 0 : partial_suffix(buf_, kCallOpen);
      out.content += buf_.substr(0, buf_.size() - hold);
      buf_.erase(0, buf_.size() - hold);
      return;
    }
    // ToolCall: buf_ starts with <tool_call>
    const size_t close = buf_.find(kCallClose);
    if (close == std::string::npos) {
      if (final) {
        out.content += buf_;  // unfinished call: keep the text
        buf_.clear();
      }
      return;
    }
    const std::string whole = buf_.substr(0, close + kCallClose.size());
    ToolCall call;
    if (parse_call(whole.substr(kCallOpen.size(), close - kCallOpen.size()), &call)) {
      out.tool_calls.push_back(call);
      after_call_ = true;
    } else {
      out.content += whole;
    }
    buf_.erase(0, whole.size());
    mode_ = Mode::Content;
  }
}

bool OutputParser::parse_call(const std::string& body, ToolCall* call) const {
  const std::string fn_open = "<function=";
  const size_t f = body.find(fn_open);
  if (f == std::string::npos || !trim(body.substr(0, f)).empty()) return false;
  const size_t name_end = body.find('>', f);
  if (name_end == std::string::npos) return false;
  call->name = trim(body.substr(f + fn_open.size(), name_end - f - fn_open.size()));
  if (call->name.empty()) return false;
  const size_t fn_close = body.find("</function>", name_end);
  if (fn_close == std::string::npos || !trim(body.substr(fn_close + 11)).empty()) return false;
  size_t pos = name_end + 1;
  const std::string p_open = "<parameter=", p_close = "</parameter>";
  while (true) {
    const size_t p = body.find(p_open, pos);
    if (p == std::string::npos || p > fn_close) {
      if (!trim(body.substr(pos, fn_close - pos)).empty()) return false;
      break;
    }
    if (!trim(body.substr(pos, p - pos)).empty()) return false;
    const size_t pn_end = body.find('>', p);
    const size_t pc = body.find(p_close, p);
    if (pn_end == std::string::npos || pc == std::string::npos || pc > fn_close || pn_end > pc) return false;
    const std::string pname = trim(body.substr(p + p_open.size(), pn_end - p - p_open.size()));
    if (pname.empty()) return false;
    const std::string raw = strip_one_newline(body.substr(pn_end + 1, pc - pn_end - 1));
    call->arguments[pname] = typed_value(call->name, pname, raw);
    pos = pc + p_close.size();
  }
  return true;
}

ordered_json OutputParser::typed_value(const std::string& fn, const std::string& param, const std::string& raw) const {
  std::string type;
  if (tools_.is_array()) {
    for (const auto& t : tools_) {
      const ordered_json& f = t.contains("function") ? t["function"] : t;
      if (!f.is_object() || f.value("name", "") != fn) continue;
      if (f.contains("parameters") && f["parameters"].contains("properties") &&
          f["parameters"]["properties"].contains(param)) {
        const auto& schema = f["parameters"]["properties"][param];
        if (schema.contains("type") && schema["type"].is_string()) type = schema["type"].get<std::string>();
        else if (schema.contains("type") && schema["type"].is_array() && !schema["type"].empty() &&
                 schema["type"][0].is_string())
          type = schema["type"][0].get<std::string>();
      }
    }
  }
  if (type.empty() || type == "string") return raw;
  const std::string v = trim(raw);
  try {
    check_json_depth(v, "a tool call argument");  // the arguments are copied and written out recursively
    if (type == "integer" || type == "number") {
      ordered_json j = ordered_json::parse(v);
      if (j.is_number()) return j;
    } else if (type == "boolean") {
      if (v == "true" || v == "True") return true;
      if (v == "false" || v == "False") return false;
    } else if (type == "object" || type == "array") {
      ordered_json j = ordered_json::parse(v);
      if ((type == "object" && j.is_object()) || (type == "array" && j.is_array())) return j;
    } else if (type == "null" && v == "null") {
      return nullptr;
    }
  } catch (const ordered_json::exception&) {
  } catch (const Error&) {
  }
  return raw;  // does not fit the schema (or nests too deeply): keep the model's text
}

}  // namespace lily
