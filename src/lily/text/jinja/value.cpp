#include "lily/text/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "lily/error.h"
#include "lily/text/jinja/limits.h"

namespace lily::jinja {

namespace {

void check_depth(int depth) {
  if (depth > kMaxValueDepth)
    throw Error("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
}

// Lists and mappings are freed one at a time from a queue rather than by
// recursion, so a value nested to any depth cannot overflow the stack when
// it goes away.
struct Reaper {
  template <class T>
  void operator()(T* p) const {
    thread_local std::vector<std::pair<void*, void (*)(void*)>> pending;
    thread_local bool draining = false;
    pending.emplace_back(p, [](void* q) { delete static_cast<T*>(q); });
    if (draining) return;
    draining = true;
    while (!pending.empty()) {
      const auto next = pending.back();
      pending.pop_back();
      next.second(next.first);  // may queue the containers it held
    }
    draining = false;
  }
};

}  // namespace

Value::Value(Array a) : kind_(Kind::Array), arr_(new Array(std::move(a)), Reaper{}) {}
Value::Value(Object o) : kind_(Kind::Object), obj_(new Object(std::move(o)), Reaper{}) {}

bool Value::holds(const void* container, int depth) const {
  if (container == nullptr) return false;
  if (identity() == container) return true;
  check_depth(depth);
  if (is_array())
    for (const Value& v : *arr_)
      if (v.holds(container, depth + 1)) return true;
  if (is_object())
    for (const auto& kv : obj_->items())
      if (kv.second.holds(container, depth + 1)) return true;
  return false;
}

const Value* Object::find(const std::string& k) const {
  auto it = index_.find(k);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}
Value* Object::find(const std::string& k) {
  auto it = index_.find(k);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}
void Object::set(const std::string& k, Value v) {
  auto it = index_.find(k);
  if (it != index_.end()) {
    items_[it->second].second = std::move(v);
    return;
  }
  index_[k] = items_.size();
  items_.emplace_back(k, std::move(v));
}

Value Value::function(Function f, std::string name) {
  Value v;
  v.kind_ = Kind::Function;
  v.fn_ = std::make_shared<Function>(std::move(f));
  v.str_ = std::make_shared<std::string>(std::move(name));
  return v;
}

Value Value::namespace_object(Object o) {
  Value v(std::move(o));
  v.is_namespace_ = true;
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return int_ != 0;
    case Kind::Float: return float_ != 0.0;
    case Kind::String: return !str_->empty();
    case Kind::Array: return !arr_->empty();
    case Kind::Object: return obj_->size() > 0 || is_namespace_;
    case Kind::Function: return true;
  }
  return false;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  // the shortest text that reads back to the same double, as Python's repr
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  const size_t e = s.find('e');
  if (e != std::string::npos) {
    // Python writes 1e+16 and 1e-05 as 1e+16 and 1e-05: two-digit exponents at least
    std::string mant = s.substr(0, e), ex = s.substr(e + 1);
    const char sign = ex[0] == '-' ? '-' : '+';
    if (ex[0] == '-' || ex[0] == '+') ex = ex.substr(1);
    while (ex.size() > 2 && ex[0] == '0') ex = ex.substr(1);
    if (ex.size() < 2) ex = "0" + ex;
    const int exp10 = std::atoi(ex.c_str()) * (sign == '-' ? -1 : 1);
    if (exp10 >= -4 && exp10 < 16) {  // Python uses positional notation in this range
      std::snprintf(buf, sizeof buf, "%.17f", d);
      std::string p = buf;
      for (int prec = 0; prec <= 20; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*f", prec, d);
        if (std::strtod(buf, nullptr) == d) {
          p = buf;
          break;
        }
      }
      if (p.find('.') == std::string::npos) p += ".0";
      return p;
    }
    return mant + "e" + sign + ex;
  }
  if (s.find('.') == std::string::npos && s.find("inf") == std::string::npos) s += ".0";
  return s;
}

namespace {
std::string python_string_repr(const std::string& s) {
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) out += std::string("\\") + q;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else out += static_cast<char>(c);
  }
  return out + q;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void to_json_impl(const Value& v, int indent, bool sort_keys, int depth, std::string& out) {
  check_depth(depth);
  if (out.size() > kMaxStringBytes)
    throw Error("tojson output longer than " + std::to_string(kMaxStringBytes) + " bytes");
  const std::string nl = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string nl_end = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const std::string item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      const double d = v.as_float();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : python_float_repr(d);
      return;
    }
    case Value::Kind::String: json_string(v.str(), out); return;
    case Value::Kind::Array: {
      if (v.array().empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < v.array().size(); ++i) {
        out += i ? item_sep + nl : nl;
        to_json_impl(v.array()[i], indent, sort_keys, depth + 1, out);
      }
      out += nl_end + "]";
      return;
    }
    case Value::Kind::Object: {
      if (v.object().size() == 0) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.object().items()) items.push_back(&kv);
      if (sort_keys)
        std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += "{";
      for (size_t i = 0; i < items.size(); ++i) {
        out += i ? item_sep + nl : nl;
        json_string(items[i]->first, out);
        out += ": ";
        to_json_impl(items[i]->second, indent, sort_keys, depth + 1, out);
      }
      out += nl_end + "}";
      return;
    }
    case Value::Kind::Function: throw Error("Object of type function is not JSON serializable");
  }
}
}  // namespace

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::String: return *str_;
    default: return repr();
  }
}

std::string Value::repr() const { return repr_at(0); }

std::string Value::repr_at(int depth) const {
  check_depth(depth);
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return int_ ? "True" : "False";
    case Kind::Int: return std::to_string(int_);
    case Kind::Float: return python_float_repr(float_);
    case Kind::String: return python_string_repr(*str_);
    case Kind::Array: {
      std::string s = "[";
      for (size_t i = 0; i < arr_->size(); ++i) s += (i ? ", " : "") + (*arr_)[i].repr_at(depth + 1);
      return s + "]";
    }
    case Kind::Object: {
      if (is_namespace_) return "<Namespace>";
      std::string s = "{";
      bool first = true;
      for (const auto& [k, v] : obj_->items()) {
        s += (first ? "" : ", ") + python_string_repr(k) + ": " + v.repr_at(depth + 1);
        first = false;
      }
      return s + "}";
    }
    case Kind::Function: return "<function " + *str_ + ">";
  }
  return "";
}

std::string Value::to_json(int indent, bool sort_keys) const {
  std::string out;
  to_json_impl(*this, indent, sort_keys, 0, out);
  return out;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Array: return "list";
    case Kind::Object: return is_namespace_ ? "Namespace" : "dict";
    case Kind::Function: return "function";
  }
  return "?";
}

Value Value::from_json(const nlohmann::ordered_json& j, const TextMap& map_text, int depth) {
  check_depth(depth);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(map_text ? map_text(j.get_ref<const std::string&>()) : j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json(e, map_text, depth + 1));
      return Value(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o.set(map_text ? map_text(it.key()) : it.key(), from_json(it.value(), map_text, depth + 1));
      return Value(std::move(o));
    }
    default: return Value();
  }
}

bool equals(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  using K = Value::Kind;
  const bool an = a.is_number() || a.kind() == K::Bool, bn = b.is_number() || b.kind() == K::Bool;
  if (an && bn) return a.as_float() == b.as_float();
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.str() == b.str();
    case K::Array: {
      if (a.array().size() != b.array().size()) return false;
      for (size_t i = 0; i < a.array().size(); ++i)
        if (!equals(a.array()[i], b.array()[i], depth + 1)) return false;
      return true;
    }
    case K::Object: {
      if (a.object().size() != b.object().size()) return false;
      for (const auto& [k, v] : a.object().items()) {
        const Value* o = b.object().find(k);
        if (o == nullptr || !equals(v, *o, depth + 1)) return false;
      }
      return true;
    }
    default: return false;
  }
}

int compare(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  const bool an = a.is_number() || a.kind() == Value::Kind::Bool, bn = b.is_number() || b.kind() == Value::Kind::Bool;
  if (an && bn) return a.as_float() < b.as_float() ? -1 : a.as_float() > b.as_float() ? 1 : 0;
  if (a.is_string() && b.is_string()) return a.str().compare(b.str()) < 0 ? -1 : a.str() == b.str() ? 0 : 1;
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < a.array().size() && i < b.array().size(); ++i)
      if (int c = compare(a.array()[i], b.array()[i], depth + 1)) return c;
    return a.array().size() < b.array().size() ? -1 : a.array().size() > b.array().size() ? 1 : 0;
  }
  throw Error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value CallArgs::get(size_t i, const std::string& name, Value def) const {
  for (const auto& [n, v] : named)
    if (n == name) return v;
  if (i < positional.size()) return positional[i];
  return def;
}

}  // namespace lily::jinja
