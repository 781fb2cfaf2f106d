#include "lily/text/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "lily/error.h"
#include "lily/text/jinja/limits.h"
#include "lily/text/jinja/interpreter.h"

namespace lily::jinja {

namespace {

[[noreturn]] void type_error(const std::string& m) { throw Error(m); }

// Every string a template builds is bounded before it is built.
void check_length(size_t bytes) {
  if (bytes > kMaxStringBytes)
    type_error("a string of " + std::to_string(bytes) + " bytes would pass the limit of " +
               std::to_string(kMaxStringBytes));
}

// Python integers do not overflow; these do, so an overflow is an error.
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) type_error("integer overflow");
  return r;
}
int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) type_error("integer overflow");
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) type_error("integer overflow");
  return r;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string strip_chars(const std::string& s, const Value& chars, bool left, bool right) {
  auto in_set = [&](char c) {
    if (chars.is_undefined() || chars.is_none()) return is_space(c);
    return chars.str().find(c) != std::string::npos;
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && in_set(s[b])) ++b;
  if (right)
    while (e > b && in_set(s[e - 1])) --e;
  return s.substr(b, e - b);
}

Array split(const std::string& s, const Value& sep, int64_t maxsplit) {
  Array out;
  if (sep.is_undefined() || sep.is_none()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        std::string rest = s.substr(i);
        while (!rest.empty() && is_space(rest.back())) rest.pop_back();
        out.push_back(Value(rest));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      out.push_back(Value(s.substr(i, j - i)));
      i = j;
    }
    return out;
  }
  const std::string d = sep.to_str();
  if (d.empty()) type_error("empty separator");
  size_t i = 0;
  while (true) {
    const size_t j = s.find(d, i);
    if (j == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
      out.push_back(Value(s.substr(i)));
      break;
    }
    out.push_back(Value(s.substr(i, j - i)));
    i = j + d.size();
  }
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, int64_t count = -1) {
  if (from.empty()) return s;
  size_t pos = 0;
  int64_t n = 0;
  while ((count < 0 || n < count) && (pos = s.find(from, pos)) != std::string::npos) {
    check_length(s.size() - from.size() + to.size());
    s.replace(pos, from.size(), to);
    pos += to.size();
    ++n;
  }
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string capitalize(std::string s) {
  s = lower(s);
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}
std::string title(std::string s) {
  bool start = true;
  for (char& c : s) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    start = !alpha;
  }
  return s;
}

int64_t length(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(code_points(v.str()).size());
  if (v.is_array()) return static_cast<int64_t>(v.array().size());
  if (v.is_object()) return static_cast<int64_t>(v.object().size());
  if (v.is_undefined()) return 0;
  type_error("object of type '" + v.type_name() + "' has no len()");
}

Array iterate(const Value& v) {
  if (v.is_array()) return v.array();
  if (v.is_string()) return string_chars(v.str());
  if (v.is_object()) {
    Array a;
    for (const auto& kv : v.object().items()) a.push_back(Value(kv.first));
    return a;
  }
  if (v.is_undefined()) return {};
  type_error("'" + v.type_name() + "' object is not iterable");
}

Value method(const std::string& name, Function f) { return Value::function(std::move(f), name); }

Value string_method(const std::string& s, const std::string& name) {
  if (name == "startswith" || name == "endswith") {
    const bool starts = name == "startswith";
    return method(name, [s, starts](CallArgs& a) {
      auto check = [&](const std::string& p) {
        return starts ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                      : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
      };
      const Value p = a.get(0, "prefix");
      if (p.is_array()) {
        for (const auto& x : p.array())
          if (check(x.to_str())) return Value(true);
        return Value(false);
      }
      return Value(check(p.to_str()));
    });
  }
  if (name == "split" || name == "rsplit")
    return method(name, [s](CallArgs& a) { return Value(split(s, a.get(0, "sep"), a.get(1, "maxsplit", Value(-1)).as_int())); });
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return method(name, [s, l, r](CallArgs& a) { return Value(strip_chars(s, a.get(0, "chars"), l, r)); });
  }
  if (name == "upper") return method(name, [s](CallArgs&) { return Value(upper(s)); });
  if (name == "lower") return method(name, [s](CallArgs&) { return Value(lower(s)); });
  if (name == "title") return method(name, [s](CallArgs&) { return Value(title(s)); });
  if (name == "capitalize") return method(name, [s](CallArgs&) { return Value(capitalize(s)); });
  if (name == "replace")
    return method(name, [s](CallArgs& a) {
      return Value(replace_all(s, a.get(0, "old").to_str(), a.get(1, "new").to_str(), a.get(2, "count", Value(-1)).as_int()));
    });
  if (name == "find" || name == "rfind" || name == "index")
    return method(name, [s, name](CallArgs& a) {
      const std::string sub = a.get(0, "sub").to_str();
      const size_t p = name == "rfind" ? s.rfind(sub) : s.find(sub);
      if (p == std::string::npos && name == "index") type_error("substring not found");
      return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(p));
    });
  if (name == "count")
    return method(name, [s](CallArgs& a) {
      const std::string sub = a.get(0, "sub").to_str();
      int64_t n = 0;
      if (!sub.empty())
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    });
  if (name == "join")
    return method(name, [s](CallArgs& a) {
      std::string out;
      bool first = true;
      for (const auto& x : iterate(a.get(0, "iterable"))) {
        const std::string piece = x.to_str();
        check_length(out.size() + s.size() + piece.size());
        out += (first ? "" : s) + piece;
        first = false;
      }
      return Value(out);
    });
  if (name == "splitlines")
    return method(name, [s](CallArgs&) {
      Array out;
      size_t i = 0;
      while (i < s.size()) {
        size_t j = s.find('\n', i);
        if (j == std::string::npos) j = s.size();
        std::string line = s.substr(i, j - i);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        out.push_back(Value(line));
        i = j + 1;
      }
      return Value(out);
    });
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum" || name == "islower" ||
      name == "isupper")
    return method(name, [s, name](CallArgs&) {
      if (s.empty()) return Value(false);
      bool ok = true;
      for (unsigned char c : s) {
        if (name == "isdigit") ok &= std::isdigit(c) != 0;
        else if (name == "isalpha") ok &= std::isalpha(c) != 0;
        else if (name == "isspace") ok &= std::isspace(c) != 0;
        else if (name == "isalnum") ok &= std::isalnum(c) != 0;
        else if (name == "islower") ok &= !std::isupper(c);
        else ok &= !std::islower(c);
      }
      return Value(ok);
    });
  return Value();
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items")
    return method(name, [d](CallArgs&) {
      Array a;
      for (const auto& [k, v] : d.object().items()) a.push_back(Value(Array{Value(k), v}));
      return Value(a);
    });
  if (name == "keys")
    return method(name, [d](CallArgs&) {
      Array a;
      for (const auto& kv : d.object().items()) a.push_back(Value(kv.first));
      return Value(a);
    });
  if (name == "values")
    return method(name, [d](CallArgs&) {
      Array a;
      for (const auto& kv : d.object().items()) a.push_back(kv.second);
      return Value(a);
    });
  if (name == "get")
    return method(name, [d](CallArgs& a) {
      const Value* v = d.object().find(a.get(0, "key").to_str());
      return v ? *v : a.get(1, "default", Value::none());
    });
  return Value();
}

Value list_method(const Value& l, const std::string& name) {
  if (name == "append")
    return method(name, [l](CallArgs& a) {
      const Value x = a.get(0, "object");
      if (x.is_function() || x.holds(l.identity())) type_error("a list cannot hold itself or a function");
      const_cast<Value&>(l).array().push_back(x);
      return Value::none();
    });
  if (name == "index")
    return method(name, [l](CallArgs& a) {
      const Value x = a.get(0, "value");
      for (size_t i = 0; i < l.array().size(); ++i)
        if (equals(l.array()[i], x)) return Value(static_cast<int64_t>(i));
      type_error(x.repr() + " is not in list");
    });
  if (name == "count")
    return method(name, [l](CallArgs& a) {
      int64_t n = 0;
      for (const auto& x : l.array()) n += equals(x, a.get(0, "value"));
      return Value(n);
    });
  return Value();
}

int64_t norm_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

Value attribute_of(const Value& v, const std::string& path) {
  Value cur = v;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('.', i);
    if (j == std::string::npos) j = path.size();
    cur = get_attr(cur, path.substr(i, j - i), false);
    i = j + 1;
  }
  return cur;
}

Value do_round(double x, int64_t prec, const std::string& how) {
  const double m = std::pow(10.0, static_cast<double>(prec));
  double r;
  if (how == "floor") r = std::floor(x * m) / m;
  else if (how == "ceil") r = std::ceil(x * m) / m;
  else r = std::round(x * m) / m;
  return Value(r);
}

std::string indent_text(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t i = 0;
  bool is_first = true;
  while (i <= s.size()) {
    size_t j = s.find('\n', i);
    const bool last = j == std::string::npos;
    if (last) j = s.size();
    const std::string line = s.substr(i, j - i);
    const bool add = (is_first ? first : true) && (blank || !line.empty());
    out += (add ? pad : "") + line;
    if (!last) out += "\n";
    is_first = false;
    i = j + 1;
    if (last) break;
  }
  return out;
}

}  // namespace

Array string_chars(const std::string& s) {
  Array out;
  for (auto& c : code_points(s)) out.push_back(Value(c));
  return out;
}

Value get_attr(const Value& base, const std::string& name, bool attribute_first) {
  if (base.is_object()) {
    if (!base.is_namespace() && attribute_first) {
      Value m = dict_method(base, name);
      if (!m.is_undefined()) return m;
    }
    const Value* v = base.object().find(name);
    if (v) return *v;
    return base.is_namespace() ? Value() : dict_method(base, name);
  }
  if (base.is_string()) return string_method(base.str(), name);
  if (base.is_array()) return list_method(base, name);
  if (base.is_none()) type_error("'None' has no attribute '" + name + "'");
  return Value();
}

Value get_item(const Value& base, const Value& key, int line) {
  if (base.is_array()) {
    if (!key.is_number()) return Value();
    const int64_t n = static_cast<int64_t>(base.array().size());
    const int64_t i = norm_index(key.as_int(), n);
    return i >= 0 && i < n ? base.array()[static_cast<size_t>(i)] : Value();
  }
  if (base.is_object()) {
    const Value* v = base.object().find(key.to_str());
    if (v) return *v;
    return key.is_string() ? get_attr(base, key.str(), false) : Value();
  }
  if (base.is_string()) {
    if (!key.is_number()) return string_method(base.str(), key.to_str());
    const auto cps = code_points(base.str());
    const int64_t n = static_cast<int64_t>(cps.size());
    const int64_t i = norm_index(key.as_int(), n);
    return i >= 0 && i < n ? Value(cps[static_cast<size_t>(i)]) : Value();
  }
  (void)line;
  if (base.is_none()) type_error("'NoneType' object is not subscriptable");
  return Value();
}

Value slice(const Value& base, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step_opt, int) {
  const int64_t step = step_opt.value_or(1);
  if (step == 0) type_error("slice step cannot be zero");
  Array items;
  const bool is_str = base.is_string();
  if (is_str) items = string_chars(base.str());
  else if (base.is_array()) items = base.array();
  else type_error("'" + base.type_name() + "' object is not subscriptable");
  const int64_t n = static_cast<int64_t>(items.size());
  auto clamp = [&](std::optional<int64_t> v, int64_t def_pos, int64_t def_neg) {
    if (!v) return step > 0 ? def_pos : def_neg;
    int64_t x = *v < 0 ? *v + n : *v;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(start, 0, n - 1), e = clamp(stop, n, -1);
  Array out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(items[static_cast<size_t>(i)]);
  if (!is_str) return Value(out);
  std::string s;
  for (const auto& c : out) s += c.str();
  return Value(s);
}

void install_globals(std::map<std::string, Value>& vars) {
  vars["raise_exception"] = Value::function(
      [](CallArgs& a) -> Value { throw TemplateRaised(a.get(0, "message").to_str()); }, "raise_exception");
  vars["range"] = Value::function(
      [](CallArgs& a) {
        int64_t start = 0, stop, step = 1;
        if (a.positional.size() == 1) stop = a.positional[0].as_int();
        else if (a.positional.size() >= 2) {
          start = a.positional[0].as_int();
          stop = a.positional[1].as_int();
          if (a.positional.size() > 2) step = a.positional[2].as_int();
        } else type_error("range expected at least 1 argument");
        if (step == 0) type_error("range() arg 3 must not be zero");
        Array out;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
          out.push_back(Value(i));
          if (out.size() > 1000000) type_error("range too large");
        }
        return Value(out);
      },
      "range");
  auto kwargs_object = [](CallArgs& a) {
    Object o;
    for (const auto& p : a.positional)
      if (p.is_object())
        for (const auto& [k, v] : p.object().items()) o.set(k, v);
    for (const auto& [k, v] : a.named) o.set(k, v);
    return o;
  };
  vars["namespace"] = Value::function([kwargs_object](CallArgs& a) { return Value::namespace_object(kwargs_object(a)); },
                                      "namespace");
  vars["dict"] = Value::function([kwargs_object](CallArgs& a) { return Value(kwargs_object(a)); }, "dict");
  vars["strftime_now"] = Value::function(
      [](CallArgs& a) {
        const std::time_t t = std::time(nullptr);
        std::tm tm{};
        localtime_r(&t, &tm);
        char buf[256];
        const size_t n = std::strftime(buf, sizeof buf, a.get(0, "format").to_str().c_str(), &tm);
        return Value(std::string(buf, n));
      },
      "strftime_now");
}

Value apply_filter(const std::string& name, const Value& in, CallArgs& a) {
  if (name == "trim") return Value(strip_chars(in.to_str(), a.get(0, "chars"), true, true));
  if (name == "tojson") {
    const Value ind = a.get(0, "indent");
    if (ind.is_number() && (ind.as_int() < 0 || ind.as_int() > 1024)) type_error("tojson indent must be 0 to 1024");
    return Value(in.to_json(ind.is_number() ? static_cast<int>(ind.as_int()) : -1, a.get(1, "sort_keys").truthy()));
  }
  if (name == "string") return Value(in.to_str());
  if (name == "safe" || name == "forceescape") return in;
  if (name == "escape" || name == "e") {
    std::string s = in.to_str(), o;
    for (char c : s) {
      if (c == '&') o += "&amp;";
      else if (c == '<') o += "&lt;";
      else if (c == '>') o += "&gt;";
      else if (c == '"') o += "&#34;";
      else if (c == '\'') o += "&#39;";
      else o += c;
    }
    return Value(o);
  }
  if (name == "items") {
    if (in.is_undefined()) return Value(Array{});
    if (!in.is_object()) type_error("Can only get item pairs from a mapping.");
    Array out;
    for (const auto& [k, v] : in.object().items()) out.push_back(Value(Array{Value(k), v}));
    return Value(out);
  }
  if (name == "dictsort") {
    if (!in.is_object()) type_error("dictsort needs a mapping");
    Array out;
    for (const auto& [k, v] : in.object().items()) out.push_back(Value(Array{Value(k), v}));
    const bool by_value = a.get(1, "by").to_str() == "value";
    std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
      return compare(x.array()[by_value], y.array()[by_value]) < 0;
    });
    return Value(out);
  }
  if (name == "length" || name == "count") return Value(length(in));
  if (name == "default" || name == "d") {
    const bool boolean = a.get(1, "boolean").truthy();
    if (in.is_undefined() || (boolean && !in.truthy())) return a.get(0, "default_value", Value(""));
    return in;
  }
  if (name == "lower") return Value(lower(in.to_str()));
  if (name == "upper") return Value(upper(in.to_str()));
  if (name == "capitalize") return Value(capitalize(in.to_str()));
  if (name == "title") return Value(title(in.to_str()));
  if (name == "replace")
    return Value(replace_all(in.to_str(), a.get(0, "old").to_str(), a.get(1, "new").to_str(), a.get(2, "count", Value(-1)).as_int()));
  if (name == "join") {
    const std::string sep = a.get(0, "d", Value("")).to_str();
    const Value attr = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& x : iterate(in)) {
      const std::string piece = (attr.is_undefined() ? x : attribute_of(x, attr.to_str())).to_str();
      check_length(out.size() + sep.size() + piece.size());
      out += (first ? "" : sep) + piece;
      first = false;
    }
    return Value(out);
  }
  if (name == "first") {
    Array items = iterate(in);
    return items.empty() ? Value() : items.front();
  }
  if (name == "last") {
    Array items = iterate(in);
    return items.empty() ? Value() : items.back();
  }
  if (name == "list") return Value(iterate(in));
  if (name == "reverse") {
    if (in.is_string()) {
      auto cps = code_points(in.str());
      std::string s;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) s += *it;
      return Value(s);
    }
    Array items = iterate(in);
    std::reverse(items.begin(), items.end());
    return Value(items);
  }
  if (name == "sort") {
    Array items = iterate(in);
    const bool rev = a.get(0, "reverse").truthy();
    const Value attr = a.get(2, "attribute");
    auto key = [&](const Value& x) { return attr.is_undefined() ? x : attribute_of(x, attr.to_str()); };
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return rev ? compare(key(y), key(x)) < 0 : compare(key(x), key(y)) < 0;
    });
    return Value(items);
  }
  if (name == "unique") {
    Array out;
    for (const auto& x : iterate(in))
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equals(x, y); })) out.push_back(x);
    return Value(out);
  }
  if (name == "int") {
    if (in.is_number() || in.kind() == Value::Kind::Bool) return Value(in.as_int());
    try {
      return Value(static_cast<int64_t>(std::stoll(strip_chars(in.to_str(), Value(), true, true))));
    } catch (...) {
      return a.get(0, "default", Value(int64_t{0}));
    }
  }
  if (name == "float") {
    if (in.is_number()) return Value(in.as_float());
    try {
      return Value(std::stod(in.to_str()));
    } catch (...) {
      return a.get(0, "default", Value(0.0));
    }
  }
  if (name == "abs") return in.kind() == Value::Kind::Int ? Value(static_cast<int64_t>(std::llabs(in.as_int()))) : Value(std::fabs(in.as_float()));
  if (name == "round")
    return do_round(in.as_float(), a.get(0, "precision", Value(int64_t{0})).as_int(), a.get(1, "method", Value("common")).to_str());
  if (name == "sum") {
    const Value attr = a.get(0, "attribute");
    Value total = a.get(1, "start", Value(int64_t{0}));
    for (const auto& x : iterate(in)) total = binary("+", total, attr.is_undefined() ? x : attribute_of(x, attr.to_str()));
    return total;
  }
  if (name == "min" || name == "max") {
    Array items = iterate(in);
    if (items.empty()) return Value();
    Value best = items[0];
    for (const auto& x : items)
      if (name == "min" ? compare(x, best) < 0 : compare(x, best) > 0) best = x;
    return best;
  }
  if (name == "map") {
    Array out;
    const Value attr = a.get(99, "attribute");
    for (const auto& x : iterate(in)) {
      if (!attr.is_undefined()) {
        Value v = attribute_of(x, attr.to_str());
        if (v.is_undefined()) v = a.get(99, "default");
        out.push_back(v);
      } else {
        CallArgs rest;
        rest.positional.assign(a.positional.begin() + (a.positional.empty() ? 0 : 1), a.positional.end());
        out.push_back(apply_filter(a.get(0, "").to_str(), x, rest));
      }
    }
    return Value(out);
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name.size() > 6, keep_if = name[0] == 's';
    Array out;
    for (const auto& x : iterate(in)) {
      const Value subject = by_attr ? attribute_of(x, a.get(0, "").to_str()) : x;
      const size_t first_arg = by_attr ? 1 : 0;
      bool ok;
      if (a.positional.size() > first_arg) {
        CallArgs rest;
        rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(first_arg) + 1, a.positional.end());
        ok = apply_test(a.positional[first_arg].to_str(), subject, rest);
      } else {
        ok = subject.truthy();
      }
      if (ok == keep_if) out.push_back(x);
    }
    return Value(out);
  }
  if (name == "indent") {
    const Value w = a.get(0, "width", Value(int64_t{4}));
    if (!w.is_string() && (w.as_int() < 0 || w.as_int() > 1024)) type_error("indent width must be 0 to 1024");
    const std::string pad = w.is_string() ? w.str() : std::string(static_cast<size_t>(w.as_int()), ' ');
    return Value(indent_text(in.to_str(), pad, a.get(1, "first").truthy(), a.get(2, "blank").truthy()));
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(split(in.to_str(), Value(), -1).size()));
  if (name == "batch") {
    const int64_t n = a.get(0, "linecount").as_int();
    if (n <= 0) type_error("batch size must be positive");
    Array out, cur;
    for (const auto& x : iterate(in)) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value(cur)), cur.clear();
    }
    if (!cur.empty()) out.push_back(Value(cur));
    return Value(out);
  }
  type_error("no filter named '" + name + "'");
}

bool apply_test(const std::string& name, const Value& v, CallArgs& a) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() || v.kind() == K::Bool;
  if (name == "integer") return v.kind() == K::Int;
  if (name == "float") return v.kind() == K::Float;
  if (name == "boolean") return v.kind() == K::Bool;
  if (name == "true") return v.kind() == K::Bool && v.as_bool();
  if (name == "false") return v.kind() == K::Bool && !v.as_bool();
  if (name == "mapping") return v.is_object() && !v.is_namespace();
  if (name == "iterable") return v.is_array() || v.is_string() || v.is_object() || v.is_undefined();
  if (name == "sequence") return v.is_array() || v.is_string() || (v.is_object() && !v.is_namespace()) || v.is_undefined();
  if (name == "callable") return v.is_function();
  if (name == "odd") return v.as_int() % 2 != 0;
  if (name == "even") return v.as_int() % 2 == 0;
  if (name == "divisibleby") return a.get(0, "num").as_int() != 0 && v.as_int() % a.get(0, "num").as_int() == 0;
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, a.get(0, "other"));
  if (name == "ne" || name == "!=") return !equals(v, a.get(0, "other"));
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, a.get(0, "other")) < 0;
  if (name == "le" || name == "<=") return compare(v, a.get(0, "other")) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, a.get(0, "other")) > 0;
  if (name == "ge" || name == ">=") return compare(v, a.get(0, "other")) >= 0;
  if (name == "in") return binary("in", v, a.get(0, "seq")).truthy();
  if (name == "sameas") return equals(v, a.get(0, "other")) && v.kind() == a.get(0, "other").kind();
  if (name == "lower") return v.is_string() && lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && upper(v.str()) == v.str();
  type_error("no test named '" + name + "'");
}

Value binary(const std::string& op, const Value& a, const Value& b) {
  using K = Value::Kind;
  const bool nums = (a.is_number() || a.kind() == K::Bool) && (b.is_number() || b.kind() == K::Bool);
  const bool ints = nums && a.kind() != K::Float && b.kind() != K::Float;
  auto unsupported = [&]() -> Value {
    type_error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  if (op == "==") return Value(equals(a, b));
  if (op == "!=") return Value(!equals(a, b));
  if (op == "<") return Value(compare(a, b) < 0);
  if (op == ">") return Value(compare(a, b) > 0);
  if (op == "<=") return Value(compare(a, b) <= 0);
  if (op == ">=") return Value(compare(a, b) >= 0);
  if (op == "~") {
    const std::string x = a.to_str(), y = b.to_str();
    check_length(x.size() + y.size());
    return Value(x + y);
  }
  if (op == "in" || op == "not in") {
    bool r = false;
    if (b.is_string()) {
      if (!a.is_string()) type_error("'in <string>' requires string as left operand, not " + a.type_name());
      r = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_array()) {
      r = std::any_of(b.array().begin(), b.array().end(), [&](const Value& x) { return equals(a, x); });
    } else if (b.is_object()) {
      r = b.object().find(a.to_str()) != nullptr;
    } else if (!b.is_undefined()) {
      type_error("argument of type '" + b.type_name() + "' is not iterable");
    }
    return Value(op == "in" ? r : !r);
  }
  if (op == "+") {
    if (ints) return Value(checked_add(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      check_length(a.str().size() + b.str().size());
      return Value(a.str() + b.str());
    }
    if (a.is_array() && b.is_array()) {
      check_length(a.array().size() + b.array().size());
      Array r = a.array();
      r.insert(r.end(), b.array().begin(), b.array().end());
      return Value(r);
    }
    if (a.is_undefined() || b.is_undefined()) type_error("cannot add an undefined value");
    return unsupported();
  }
  if (op == "*" && ((a.is_string() && b.kind() == K::Int) || (a.kind() == K::Int && b.is_string()))) {
    const std::string& s = a.is_string() ? a.str() : b.str();
    const int64_t times = std::max<int64_t>(0, a.is_string() ? b.as_int() : a.as_int());
    if (!s.empty()) check_length(times > static_cast<int64_t>(kMaxStringBytes) ? kMaxStringBytes + 1 : s.size() * static_cast<size_t>(times));
    std::string r;
    for (int64_t i = 0; i < times && !s.empty(); ++i) r += s;
    return Value(r);
  }
  if (!nums) return unsupported();
  if (op == "-") return ints ? Value(checked_sub(a.as_int(), b.as_int())) : Value(a.as_float() - b.as_float());
  if (op == "*") return ints ? Value(checked_mul(a.as_int(), b.as_int())) : Value(a.as_float() * b.as_float());
  if (op == "/") {
    if (b.as_float() == 0) type_error("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (b.as_float() == 0) type_error("integer division or modulo by zero");
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (x == INT64_MIN && y == -1) type_error("integer overflow");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;  // Python floors
      return op == "//" ? Value(q) : Value(r);
    }
    const double q = std::floor(a.as_float() / b.as_float());
    return op == "//" ? Value(q) : Value(a.as_float() - q * b.as_float());
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      const int64_t base = a.as_int(), e = b.as_int();
      int64_t p = 1;
      if (base >= -1 && base <= 1) p = base == 0 ? (e == 0 ? 1 : 0) : (base == -1 && e % 2 ? -1 : 1);
      else
        for (int64_t i = 0; i < e; ++i) p = checked_mul(p, base);  // overflows within 63
      return Value(p);
    }
    return Value(std::pow(a.as_float(), b.as_float()));
  }
  return unsupported();
}

}  // namespace lily::jinja
