// The Jinja built-ins chat templates use: filters, tests, operators,
// attribute and item access (with Python's str, dict and list methods), and
// the globals Hugging Face provides (raise_exception, namespace, range,
// strftime_now).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "lily/text/jinja/value.h"

namespace lily::jinja {

void install_globals(std::map<std::string, Value>& vars);

// `a.name`: Python attribute first (methods), then the mapping key.
Value get_attr(const Value& base, const std::string& name, bool attribute_first);
// `a[key]`: item first, then attribute.
Value get_item(const Value& base, const Value& key, int line);
Value slice(const Value& base, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step, int line);
// A string's code points as one-character strings.
Array string_chars(const std::string& s);

Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
bool apply_test(const std::string& name, const Value& input, CallArgs& args);
Value binary(const std::string& op, const Value& a, const Value& b);

}  // namespace lily::jinja
