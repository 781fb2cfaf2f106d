// Syntax tree of a parsed Jinja template.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lily/text/jinja/value.h"

namespace lily::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Type {
    Literal, Name, List, Dict, Tuple, GetAttr, GetItem, Slice, Call, Filter, Test,
    Unary, Binary, And, Or, Not, Conditional
  };
  Type type;
  int line = 0;
  Value literal;                  // Literal
  std::string name;               // Name, GetAttr attribute, Filter/Test name, Unary/Binary operator
  std::vector<ExprPtr> children;  // operands / elements / call target + positional args
  std::vector<std::pair<std::string, ExprPtr>> named;  // keyword arguments; Dict uses children in pairs
  bool negated = false;           // Test: "is not"
  explicit Expr(Type t) : type(t) {}
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Node {
  enum class Type { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue, CallBlock, FilterBlock };
  Type type;
  int line = 0;
  std::string text;                       // Text
  ExprPtr expr;                           // Output value, For iterable, Set value, If uses branches
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (condition or null for else, body)
  std::vector<std::string> targets;       // For loop vars, Set targets ("ns.attr" for namespace attributes)
  ExprPtr filter;                         // For ... if cond; FilterBlock filter chain
  Body body, else_body;                   // For, SetBlock, Macro, CallBlock
  std::string name;                       // Macro name
  std::vector<MacroParam> params;         // Macro
  explicit Node(Type t) : type(t) {}
};

struct Template {
  Body body;
};

}  // namespace lily::jinja
