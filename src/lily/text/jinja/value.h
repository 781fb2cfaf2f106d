// Values of the Jinja interpreter, with Python's semantics where chat
// templates rely on them: truthiness, str() and repr() text, equality,
// insertion-ordered mappings, and an "undefined" distinct from none.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lily::jinja {

class Value;
using Array = std::vector<Value>;
// Insertion-ordered string-keyed mapping, as Python dicts are.
class Object {
 public:
  const Value* find(const std::string& k) const;
  Value* find(const std::string& k);
  void set(const std::string& k, Value v);
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  size_t size() const;  // defined below, where Value is complete

 private:
  std::vector<std::pair<std::string, Value>> items_;
  std::map<std::string, size_t> index_;
};

struct CallArgs;
using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, Array, Object, Function };

  Value() = default;  // undefined
  static Value none() { Value v; v.kind_ = Kind::None; return v; }
  Value(bool b) : kind_(Kind::Bool), int_(b) {}
  Value(int64_t i) : kind_(Kind::Int), int_(i) {}
  Value(int i) : kind_(Kind::Int), int_(i) {}
  Value(double d) : kind_(Kind::Float), float_(d) {}
  Value(std::string s) : kind_(Kind::String), str_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(Array a);
  Value(Object o);
  static Value function(Function f, std::string name);
  // A namespace(): a mapping whose attributes templates may assign.
  static Value namespace_object(Object o);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }
  bool is_function() const { return kind_ == Kind::Function; }
  bool is_namespace() const { return is_namespace_; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(float_) : int_; }
  double as_float() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return *str_; }
  const Array& array() const { return *arr_; }
  Array& array() { return *arr_; }
  const Object& object() const { return *obj_; }
  Object& object() { return *obj_; }
  const Function& func() const { return *fn_; }
  const std::string& name() const { return *str_; }  // function name

  bool truthy() const;
  std::string to_str() const;   // Python str()
  std::string repr() const;     // Python repr()
  std::string to_json(int indent = -1, bool sort_keys = false) const;  // json.dumps(ensure_ascii=False)
  std::string type_name() const;  // Python-ish type name for messages

  // Throws lily::Error for JSON nested deeper than kMaxValueDepth.
  // `map_text`, when given, is applied to every string and key.
  using TextMap = std::function<std::string(std::string_view)>;
  static Value from_json(const nlohmann::ordered_json& j, const TextMap& map_text = {}, int depth = 0);
  // True when this value is `container` or holds it at any depth (by
  // identity): the check that keeps a list or namespace from containing itself.
  bool holds(const void* container, int depth = 0) const;
  const void* identity() const { return arr_ ? static_cast<const void*>(arr_.get()) : obj_.get(); }

 private:
  std::string repr_at(int depth) const;

  Kind kind_ = Kind::Undefined;
  bool is_namespace_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<std::string> str_;
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;
  std::shared_ptr<Function> fn_;
};

inline size_t Object::size() const { return items_.size(); }

bool equals(const Value& a, const Value& b, int depth = 0);
// Python ordering for sort and comparisons; throws on unorderable kinds.
int compare(const Value& a, const Value& b, int depth = 0);
std::string python_float_repr(double d);

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  // The i-th positional or the named argument `name`, else `def`.
  Value get(size_t i, const std::string& name, Value def = Value()) const;
};

}  // namespace lily::jinja
