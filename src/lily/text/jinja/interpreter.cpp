#include "lily/text/jinja/interpreter.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "lily/error.h"
#include "lily/text/jinja/builtins.h"
#include "lily/text/jinja/limits.h"

namespace lily::jinja {

namespace {

struct Frame {
  std::map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;

  const Value* lookup(const std::string& n) const {
    for (const Frame* f = this; f; f = f->parent.get()) {
      auto it = f->vars.find(n);
      if (it != f->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  Renderer(const Object& ctx, uint64_t max_steps) : max_steps_(max_steps) {
    globals_ = std::make_shared<Frame>();
    for (const auto& [k, v] : ctx.items()) globals_->vars[k] = v;
    install_globals(globals_->vars);
  }

  std::string run(const Template& t) {
    std::string out;
    auto top = std::make_shared<Frame>();
    top->parent = globals_;
    exec_body(t.body, top, out);
    return out;
  }

 private:
  [[noreturn]] static void fail(int line, const std::string& why) {
    throw Error("template error at line " + std::to_string(line) + ": " + why);
  }

  // Counts one step of the render and one level of its nesting; the level
  // is given back when the guard goes.
  class Budget {
   public:
    Budget(Renderer& r, int line) : r_(r) {
      if (++r_.steps_ > r_.max_steps_)
        fail(line, "the render took more than " + std::to_string(r_.max_steps_) + " steps");
      if (++r_.depth_ > kMaxRenderDepth) {
        --r_.depth_;
        fail(line, "the render nested deeper than " + std::to_string(kMaxRenderDepth) +
                       " levels (a macro that calls itself without end?)");
      }
    }
    ~Budget() { --r_.depth_; }

   private:
    Renderer& r_;
  };

  static void append_output(std::string& out, const std::string& s, int line) {
    if (out.size() + s.size() > kMaxStringBytes)
      fail(line, "the output grew past " + std::to_string(kMaxStringBytes) + " bytes");
    out += s;
  }

  Flow exec_body(const Body& body, const FramePtr& f, std::string& out) {
    for (const auto& n : body) {
      const Flow fl = exec(*n, f, out);
      if (fl != Flow::Normal) return fl;
    }
    return Flow::Normal;
  }

  Flow exec(const Node& n, const FramePtr& f, std::string& out) {
    const Budget budget(*this, n.line);
    switch (n.type) {
      case Node::Type::Text: append_output(out, n.text, n.line); return Flow::Normal;
      case Node::Type::Output: append_output(out, eval(*n.expr, f).to_str(), n.line); return Flow::Normal;
      case Node::Type::If:
        for (const auto& [cond, body] : n.branches)
          if (!cond || eval(*cond, f).truthy()) return exec_body(body, f, out);
        return Flow::Normal;
      case Node::Type::For: return exec_for(n, f, out);
      case Node::Type::Set: assign(n, n.targets, eval(*n.expr, f), f); return Flow::Normal;
      case Node::Type::SetBlock: {
        std::string captured;
        exec_body(n.body, f, captured);
        Value v(captured);
        if (n.filter) v = eval_with_block(*n.filter, f, v);
        assign(n, n.targets, v, f);
        return Flow::Normal;
      }
      case Node::Type::FilterBlock: {
        std::string captured;
        exec_body(n.body, f, captured);
        append_output(out, eval_with_block(*n.filter, f, Value(captured)).to_str(), n.line);
        return Flow::Normal;
      }
      case Node::Type::Macro: f->vars[n.name] = make_macro(n, f); return Flow::Normal;
      case Node::Type::CallBlock: {
        // caller() renders the block body
        auto inner = std::make_shared<Frame>();
        inner->parent = f;
        inner->vars["caller"] = make_macro(n, f);
        append_output(out, eval(*n.expr, inner).to_str(), n.line);
        return Flow::Normal;
      }
      case Node::Type::Break: return Flow::Break;
      case Node::Type::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  Value eval_with_block(const Expr& e, const FramePtr& f, const Value& block) {
    const Value saved = block_;
    block_ = block;
    Value v = eval(e, f);
    block_ = saved;
    return v;
  }

  void assign(const Node& n, const std::vector<std::string>& targets, const Value& v, const FramePtr& f) {
    if (targets.size() == 1) {
      assign_one(n, targets[0], v, f);
      return;
    }
    if (!v.is_array() || v.array().size() != targets.size())
      fail(n.line, "cannot unpack " + v.type_name() + " into " + std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) assign_one(n, targets[i], v.array()[i], f);
  }

  void assign_one(const Node& n, const std::string& target, const Value& v, const FramePtr& f) {
    const size_t dot = target.find('.');
    if (dot == std::string::npos) {
      f->vars[target] = v;
      return;
    }
    const std::string ns = target.substr(0, dot), attr = target.substr(dot + 1);
    const Value* obj = f->lookup(ns);
    if (!obj || !obj->is_namespace()) fail(n.line, "cannot assign attribute on non-namespace object '" + ns + "'");
    if (v.is_function() || v.holds(obj->identity()))
      fail(n.line, "a namespace cannot hold itself or a function ('" + target + "')");
    const_cast<Value*>(obj)->object().set(attr, v);  // namespaces share their mapping
  }

  // The macro refers to the frame that defines it without owning it (the
  // frame holds the macro: owning it back would be a cycle that keeps every
  // frame, and the request's messages, alive after the render). The
  // renderer keeps such frames until the render ends.
  Value make_macro(const Node& n, const FramePtr& defining) {
    const Node* node = &n;
    defining_frames_.push_back(defining);
    const Frame* scope = defining.get();
    return Value::function(
        [this, node, scope](CallArgs& args) {
          const Budget budget(*this, node->line);
          auto f = std::make_shared<Frame>();
          f->parent = std::shared_ptr<Frame>(std::shared_ptr<Frame>(), const_cast<Frame*>(scope));
          size_t pos = 0;
          for (const auto& p : node->params) {
            Value v;
            bool have = false;
            for (const auto& [nm, val] : args.named)
              if (nm == p.name) v = val, have = true;
            if (!have && pos < args.positional.size()) v = args.positional[pos], have = true;
            ++pos;
            if (!have && p.default_value) v = eval(*p.default_value, f);
            f->vars[p.name] = v;
          }
          Array varargs;
          for (size_t i = node->params.size(); i < args.positional.size(); ++i) varargs.push_back(args.positional[i]);
          f->vars["varargs"] = Value(varargs);
          std::string out;
          exec_body(node->body, f, out);
          return Value(out);
        },
        n.name);
  }

  Flow exec_for(const Node& n, const FramePtr& f, std::string& out) {
    Value seq = eval(*n.expr, f);
    Array items;
    if (seq.is_array()) items = seq.array();
    else if (seq.is_object())
      for (const auto& kv : seq.object().items()) items.push_back(Value(kv.first));
    else if (seq.is_string())
      items = string_chars(seq.str());
    else if (!seq.is_undefined() && !seq.is_none())
      fail(n.line, "'" + seq.type_name() + "' object is not iterable");
    else if (seq.is_none())
      fail(n.line, "'NoneType' object is not iterable");
    if (n.filter) {
      Array kept;
      for (const Value& it : items) {
        const Budget budget(*this, n.line);
        auto ff = std::make_shared<Frame>();
        ff->parent = f;
        bind_targets(n, it, ff);
        if (eval(*n.filter, ff).truthy()) kept.push_back(it);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (!n.else_body.empty()) return exec_body(n.else_body, f, out) == Flow::Break ? Flow::Normal : Flow::Normal;
      return Flow::Normal;
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      const Budget budget(*this, n.line);  // an empty body still costs a step per item
      auto ff = std::make_shared<Frame>();
      ff->parent = f;
      bind_targets(n, items[i], ff);
      Object loop;
      loop.set("index", Value(i + 1));
      loop.set("index0", Value(i));
      loop.set("revindex", Value(len - i));
      loop.set("revindex0", Value(len - i - 1));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == len - 1));
      loop.set("length", Value(len));
      loop.set("depth", Value(1));
      loop.set("depth0", Value(0));
      if (i > 0) loop.set("previtem", items[i - 1]);
      if (i + 1 < len) loop.set("nextitem", items[i + 1]);
      loop.set("cycle", Value::function(
                            [i](CallArgs& a) {
                              if (a.positional.empty()) return Value();
                              return a.positional[static_cast<size_t>(i) % a.positional.size()];
                            },
                            "cycle"));
      ff->vars["loop"] = Value(std::move(loop));
      const Flow fl = exec_body(n.body, ff, out);
      if (fl == Flow::Break) break;
    }
    return Flow::Normal;
  }

  void bind_targets(const Node& n, const Value& item, const FramePtr& f) {
    if (n.targets.size() == 1) {
      f->vars[n.targets[0]] = item;
      return;
    }
    if (!item.is_array() || item.array().size() != n.targets.size())
      fail(n.line, "cannot unpack " + item.type_name() + " into " + std::to_string(n.targets.size()) + " loop variables");
    for (size_t k = 0; k < n.targets.size(); ++k) f->vars[n.targets[k]] = item.array()[k];
  }

  Value eval(const Expr& e, const FramePtr& f) {
    const Budget budget(*this, e.line);
    switch (e.type) {
      case Expr::Type::Literal: return e.name == "__block__" ? block_ : e.literal;
      case Expr::Type::Name: {
        const Value* v = f->lookup(e.name);
        return v ? *v : Value();
      }
      case Expr::Type::List:
      case Expr::Type::Tuple: {
        Array a;
        for (const auto& c : e.children) a.push_back(eval(*c, f));
        return Value(std::move(a));
      }
      case Expr::Type::Dict: {
        Object o;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value k = eval(*e.children[i], f);
          o.set(k.to_str(), eval(*e.children[i + 1], f));
        }
        return Value(std::move(o));
      }
      case Expr::Type::GetAttr: {
        Value base = eval(*e.children[0], f);
        if (base.is_undefined()) fail(e.line, "'" + describe(*e.children[0]) + "' is undefined");
        return get_attr(base, e.name, /*attribute_first=*/true);
      }
      case Expr::Type::GetItem: {
        Value base = eval(*e.children[0], f);
        if (base.is_undefined()) fail(e.line, "'" + describe(*e.children[0]) + "' is undefined");
        return get_item(base, eval(*e.children[1], f), e.line);
      }
      case Expr::Type::Slice: {
        Value base = eval(*e.children[0], f);
        auto opt = [&](const ExprPtr& p) -> std::optional<int64_t> {
          if (!p) return std::nullopt;
          Value v = eval(*p, f);
          if (v.is_none()) return std::nullopt;
          return v.as_int();
        };
        return slice(base, opt(e.children[1]), opt(e.children[2]), opt(e.children[3]), e.line);
      }
      case Expr::Type::Call: {
        Value fn = eval(*e.children[0], f);
        CallArgs args;
        for (size_t i = 1; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i], f));
        for (const auto& [n, x] : e.named) args.named.emplace_back(n, eval(*x, f));
        if (!fn.is_function()) fail(e.line, "'" + describe(*e.children[0]) + "' is not callable");
        return call_function(fn, args, e.line);
      }
      case Expr::Type::Filter: {
        Value input = eval(*e.children[0], f);
        CallArgs args;
        for (size_t i = 1; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i], f));
        for (const auto& [n, x] : e.named) args.named.emplace_back(n, eval(*x, f));
        try {
          return apply_filter(e.name, input, args);
        } catch (const TemplateRaised&) {
          throw;
        } catch (const std::exception& ex) {
          fail(e.line, ex.what());
        }
      }
      case Expr::Type::Test: {
        Value input = eval(*e.children[0], f);
        CallArgs args;
        for (size_t i = 1; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i], f));
        bool r;
        try {
          r = apply_test(e.name, input, args);
        } catch (const std::exception& ex) {
          fail(e.line, ex.what());
        }
        return Value(e.negated ? !r : r);
      }
      case Expr::Type::Unary: {
        Value v = eval(*e.children[0], f);
        if (!v.is_number()) fail(e.line, "bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
        if (e.name == "+") return v;
        if (v.kind() == Value::Kind::Int && v.as_int() == INT64_MIN) fail(e.line, "integer overflow");
        return v.kind() == Value::Kind::Int ? Value(-v.as_int()) : Value(-v.as_float());
      }
      case Expr::Type::Binary: {
        Value a = eval(*e.children[0], f), b = eval(*e.children[1], f);
        try {
          return binary(e.name, a, b);
        } catch (const std::exception& ex) {
          fail(e.line, ex.what());
        }
      }
      case Expr::Type::And: {
        Value a = eval(*e.children[0], f);
        return a.truthy() ? eval(*e.children[1], f) : a;
      }
      case Expr::Type::Or: {
        Value a = eval(*e.children[0], f);
        return a.truthy() ? a : eval(*e.children[1], f);
      }
      case Expr::Type::Not: return Value(!eval(*e.children[0], f).truthy());
      case Expr::Type::Conditional:
        if (eval(*e.children[0], f).truthy()) return eval(*e.children[1], f);
        return e.children[2] ? eval(*e.children[2], f) : Value();
    }
    return Value();
  }

  static std::string describe(const Expr& e) {
    if (e.type == Expr::Type::Name) return e.name;
    if (e.type == Expr::Type::GetAttr) return describe(*e.children[0]) + "." + e.name;
    return "expression";
  }

  Value call_function(const Value& fn, CallArgs& args, int line) {
    try {
      return fn.func()(args);
    } catch (const TemplateRaised&) {
      throw;
    } catch (const Error& ex) {
      const std::string what = ex.what();
      if (what.rfind("template error", 0) == 0) throw;
      fail(line, what);
    }
  }

  FramePtr globals_;
  std::vector<FramePtr> defining_frames_;
  Value block_;
  uint64_t steps_ = 0;
  const uint64_t max_steps_;
  int depth_ = 0;
};

}  // namespace

std::string render(const Template& tmpl, const Object& context, uint64_t max_steps) {
  Renderer r(context, max_steps);
  return r.run(tmpl);
}

}  // namespace lily::jinja
