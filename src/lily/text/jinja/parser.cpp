#include "lily/text/jinja/parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

#include "lily/error.h"
#include "lily/text/jinja/limits.h"

namespace lily::jinja {

namespace {

// ---------------------------------------------------------------- segments

struct Segment {
  enum Kind { Text, Var, Block } kind;
  std::string text;  // raw text, or the inside of the tag
  int line;
};

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Line numbers of positions asked for in increasing order, counted once
// (a template of many tags must not cost the square of its length).
class LineCounter {
 public:
  explicit LineCounter(const std::string& s) : s_(s) {}
  int at(size_t pos) {
    if (pos < pos_) pos_ = 0, line_ = 1;
    for (; pos_ < pos && pos_ < s_.size(); ++pos_) line_ += s_[pos_] == '\n';
    return line_;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
  int line_ = 1;
};

// Finds the end of a tag whose inside starts at `from`, skipping string
// literals and bracketed expressions (so "{{ {'a': {}} }}" closes at the end).
size_t find_close(const std::string& s, size_t from, const char* close) {
  char quote = 0;
  int depth = 0;
  for (size_t i = from; i + 1 < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (depth == 0 && c == close[0] && s[i + 1] == close[1]) {
      return i;
    }
  }
  return std::string::npos;
}

std::vector<Segment> segment(std::string src) {
  if (!src.empty() && src.back() == '\n') {  // keep_trailing_newline = False
    src.pop_back();
    if (!src.empty() && src.back() == '\r') src.pop_back();
  }
  std::vector<Segment> out;
  LineCounter lines(src);
  size_t pos = 0;
  bool line_starting = true;  // the previous tag ended at a line start (its newline was trimmed)
  bool strip_next = false;    // the previous tag ended with "-"
  while (pos <= src.size()) {
    size_t open = std::string::npos;
    for (size_t i = pos; i + 1 < src.size(); ++i)
      if (src[i] == '{' && (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#')) {
        open = i;
        break;
      }
    std::string text = src.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && is_ws(text[k])) ++k;
      text.erase(0, k);
    }
    if (open == std::string::npos) {
      if (!text.empty()) out.push_back({Segment::Text, text, lines.at(pos)});
      break;
    }
    const char kind = src[open + 1];
    size_t inner = open + 2;
    const char marker = inner < src.size() ? src[inner] : 0;
    if (marker == '-') {
      while (!text.empty() && is_ws(text.back())) text.pop_back();
      ++inner;
    } else if (marker == '+') {
      ++inner;
    } else if (kind != '{') {
      // lstrip_blocks: drop spaces and tabs between a line start and a block or comment tag
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool only_ws = true;
        for (size_t k = l_pos; k < text.size(); ++k) only_ws &= text[k] == ' ' || text[k] == '\t';
        if (only_ws) text.erase(l_pos);
      }
    }
    if (!text.empty()) out.push_back({Segment::Text, text, lines.at(pos)});
    const int line = lines.at(open);
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t end = kind == '#' ? src.find("#}", inner) : find_close(src, inner, close);
    if (end == std::string::npos)
      throw Error("template syntax error at line " + std::to_string(line) + ": unclosed '{" + std::string(1, kind) + "'");
    std::string body = src.substr(inner, end - inner);
    strip_next = false;
    if (!body.empty() && body.back() == '-') {
      body.pop_back();
      strip_next = true;
    }
    size_t after = end + 2;
    line_starting = false;
    if (!strip_next && kind != '{' && after < src.size() && src[after] == '\n') {  // trim_blocks
      ++after;
      line_starting = true;
    }
    if (kind == '%') {
      // {% raw %} ... {% endraw %} is copied verbatim
      std::string word = body;
      while (!word.empty() && is_ws(word.front())) word.erase(word.begin());
      while (!word.empty() && is_ws(word.back())) word.pop_back();
      if (word == "raw") {
        size_t e = src.find("endraw", after);
        size_t tag = e == std::string::npos ? e : src.rfind("{%", e);
        if (tag == std::string::npos) throw Error("template syntax error at line " + std::to_string(line) + ": unclosed raw block");
        std::string raw = src.substr(after, tag - after);
        if (src[tag + 2] == '-')
          while (!raw.empty() && is_ws(raw.back())) raw.pop_back();
        out.push_back({Segment::Text, raw, line});
        size_t close_end = src.find("%}", e);
        if (close_end == std::string::npos) throw Error("template syntax error: unclosed endraw");
        strip_next = src[close_end - 1] == '-';
        after = close_end + 2;
        if (!strip_next && after < src.size() && src[after] == '\n') ++after;
        pos = after;
        continue;
      }
      out.push_back({Segment::Block, body, line});
    } else if (kind == '{') {
      out.push_back({Segment::Var, body, line});
    }
    pos = after;
  }
  return out;
}

// ---------------------------------------------------------------- tokens

struct Tok {
  enum Kind { Name, Int, Float, String, Op, End } kind;
  std::string text;
  double num = 0;
  int64_t inum = 0;
};

std::vector<Tok> lex(const std::string& s, int line) {
  std::vector<Tok> out;
  size_t i = 0;
  auto fail = [&](const std::string& why) {
    return Error("template syntax error at line " + std::to_string(line) + ": " + why);
  };
  while (i < s.size()) {
    const char c = s[i];
    if (is_ws(c)) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::Name, s.substr(i, j - i)});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string t = s.substr(i, j - i);
      t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
      Tok tok{is_float ? Tok::Float : Tok::Int, t};
      try {
        if (is_float) tok.num = std::stod(t);
        else tok.inum = std::stoll(t);
      } catch (const std::out_of_range&) {
        throw fail("number out of range: " + t);
      }
      out.push_back(tok);
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          const char e = s[++j];
          switch (e) {
            case 'n': v += '\n'; break;
            case 't': v += '\t'; break;
            case 'r': v += '\r'; break;
            case '\\': v += '\\'; break;
            case '\'': v += '\''; break;
            case '"': v += '"'; break;
            case '0': v += '\0'; break;
            default: v += '\\'; v += e;
          }
        } else {
          v += s[j];
        }
      }
      if (j >= s.size()) throw fail("unterminated string literal");
      out.push_back({Tok::String, v});
      i = j + 1;
    } else {
      static const char* ops[] = {"==", "!=", "<=", ">=", "//", "**", "<", ">", "+", "-", "*", "/", "%", "~",
                                  "|",  ".",  ",",  ":",  "(",  ")",  "[", "]", "{", "}", "="};
      bool matched = false;
      for (const char* op : ops) {
        const size_t n = std::strlen(op);
        if (s.compare(i, n, op) == 0) {
          out.push_back({Tok::Op, op});
          i += n;
          matched = true;
          break;
        }
      }
      if (!matched) throw fail(std::string("unexpected character '") + c + "'");
    }
  }
  out.push_back({Tok::End, ""});
  return out;
}

// ---------------------------------------------------------------- expressions

class ExprParser {
 public:
  ExprParser(std::vector<Tok> toks, int line) : t_(std::move(toks)), line_(line) {}

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("template syntax error at line " + std::to_string(line_) + ": " + why);
  }
  const Tok& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Tok::End; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).kind == Tok::Op && peek(k).text == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).kind == Tok::Name && peek(k).text == n; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "', got '" + peek().text + "'");
  }
  std::string expect_name() {
    if (peek().kind != Tok::Name) fail("expected a name, got '" + peek().text + "'");
    return t_[i_++].text;
  }
  void expect_end() {
    if (!at_end()) fail("unexpected '" + peek().text + "'");
  }

  // One level of expression nesting, given back when the guard goes.
  struct Nest {
    explicit Nest(ExprParser& p) : p_(p) {
      if (++p_.depth_ > kMaxSyntaxDepth) p_.fail("expression nested too deeply");
    }
    ~Nest() { --p_.depth_; }
    ExprParser& p_;
  };

  ExprPtr make(Expr::Type t) {
    auto e = std::make_unique<Expr>(t);
    e->line = line_;
    return e;
  }

  // expression := or ['if' or ['else' expression]]
  ExprPtr expression(bool allow_conditional = true) {
    const Nest nest(*this);
    ExprPtr e = or_expr();
    if (allow_conditional && is_name("if")) {
      ++i_;
      auto c = make(Expr::Type::Conditional);
      ExprPtr cond = or_expr();
      ExprPtr other = accept_name("else") ? expression() : nullptr;
      c->children.push_back(std::move(cond));
      c->children.push_back(std::move(e));
      c->children.push_back(std::move(other));
      return c;
    }
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (accept_name("or")) {
      auto n = make(Expr::Type::Or);
      n->children.push_back(std::move(e));
      n->children.push_back(and_expr());
      e = std::move(n);
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (accept_name("and")) {
      auto n = make(Expr::Type::And);
      n->children.push_back(std::move(e));
      n->children.push_back(not_expr());
      e = std::move(n);
    }
    return e;
  }
  ExprPtr not_expr() {
    const Nest nest(*this);
    if (accept_name("not")) {
      auto n = make(Expr::Type::Not);
      n->children.push_back(not_expr());
      return n;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    while (true) {
      std::string op;
      if (peek().kind == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                     peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = t_[i_++].text;
      } else if (is_name("in")) {
        ++i_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        break;
      }
      auto n = make(Expr::Type::Binary);
      n->name = op;
      n->children.push_back(std::move(e));
      n->children.push_back(math1());
      e = std::move(n);
    }
    return e;
  }
  ExprPtr binary_chain(ExprPtr (ExprParser::*next)(), std::initializer_list<const char*> ops) {
    ExprPtr e = (this->*next)();
    while (true) {
      const char* hit = nullptr;
      for (const char* op : ops)
        if (is_op(op)) hit = op;
      if (!hit) break;
      ++i_;
      auto n = make(Expr::Type::Binary);
      n->name = hit;
      n->children.push_back(std::move(e));
      n->children.push_back((this->*next)());
      e = std::move(n);
    }
    return e;
  }
  ExprPtr math1() { return binary_chain(&ExprParser::concat, {"+", "-"}); }
  ExprPtr concat() { return binary_chain(&ExprParser::math2, {"~"}); }
  ExprPtr math2() { return binary_chain(&ExprParser::power, {"*", "/", "//", "%"}); }
  ExprPtr power() { return binary_chain(&ExprParser::unary, {"**"}); }
  ExprPtr unary() {
    const Nest nest(*this);
    if (is_op("-") || is_op("+")) {
      auto n = make(Expr::Type::Unary);
      n->name = t_[i_++].text;
      n->children.push_back(unary());
      return n;
    }
    ExprPtr e = postfix(primary());
    return filters_and_tests(std::move(e));
  }

  void call_args(Expr& call) {
    // after '(' : positional and keyword arguments up to ')'
    while (!accept_op(")")) {
      if (peek().kind == Tok::Name && is_op("=", 1)) {
        std::string n = t_[i_].text;
        i_ += 2;
        call.named.emplace_back(n, expression());
      } else {
        call.children.push_back(expression());
      }
      if (!is_op(")")) expect_op(",");
    }
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (accept_op(".")) {
        auto n = make(Expr::Type::GetAttr);
        if (peek().kind == Tok::Int) n->name = t_[i_++].text;
        else n->name = expect_name();
        n->children.push_back(std::move(e));
        e = std::move(n);
      } else if (accept_op("[")) {
        ExprPtr a, b, c;
        bool slice = false;
        if (!is_op(":")) a = expression();
        if (accept_op(":")) {
          slice = true;
          if (!is_op(":") && !is_op("]")) b = expression();
          if (accept_op(":") && !is_op("]")) c = expression();
        }
        expect_op("]");
        auto n = make(slice ? Expr::Type::Slice : Expr::Type::GetItem);
        n->children.push_back(std::move(e));
        n->children.push_back(std::move(a));
        if (slice) {
          n->children.push_back(std::move(b));
          n->children.push_back(std::move(c));
        }
        e = std::move(n);
      } else if (accept_op("(")) {
        auto n = make(Expr::Type::Call);
        n->children.push_back(std::move(e));
        call_args(*n);
        e = std::move(n);
      } else {
        return e;
      }
    }
  }

  ExprPtr filters_and_tests(ExprPtr e) {
    while (true) {
      if (accept_op("|")) {
        auto n = make(Expr::Type::Filter);
        n->name = expect_name();
        while (accept_op(".")) n->name += "." + expect_name();
        n->children.push_back(std::move(e));
        if (accept_op("(")) call_args(*n);
        e = std::move(n);
      } else if (is_name("is")) {
        ++i_;
        auto n = make(Expr::Type::Test);
        n->negated = accept_name("not");
        n->name = expect_name();
        n->children.push_back(std::move(e));
        if (accept_op("(")) {
          call_args(*n);
        } else if (peek().kind == Tok::String || peek().kind == Tok::Int || peek().kind == Tok::Float ||
                   (peek().kind == Tok::Name && !is_name("and") && !is_name("or") && !is_name("if") &&
                    !is_name("else") && !is_name("is") && !is_name("in") && !is_name("not"))) {
          n->children.push_back(postfix(primary()));  // "is divisibleby 3", "is sameas x"
        }
        e = std::move(n);
      } else {
        return e;
      }
    }
  }

  ExprPtr primary() {
    const Tok& t = peek();
    if (t.kind == Tok::String) {
      std::string s = t.text;
      ++i_;
      while (peek().kind == Tok::String) s += t_[i_++].text;  // adjacent literals concatenate
      auto n = make(Expr::Type::Literal);
      n->literal = Value(s);
      return n;
    }
    if (t.kind == Tok::Int || t.kind == Tok::Float) {
      auto n = make(Expr::Type::Literal);
      n->literal = t.kind == Tok::Int ? Value(t.inum) : Value(t.num);
      ++i_;
      return n;
    }
    if (t.kind == Tok::Name) {
      ++i_;
      auto n = make(Expr::Type::Literal);
      if (t.text == "true" || t.text == "True") n->literal = Value(true);
      else if (t.text == "false" || t.text == "False") n->literal = Value(false);
      else if (t.text == "none" || t.text == "None") n->literal = Value::none();
      else {
        n = make(Expr::Type::Name);
        n->name = t.text;
      }
      return n;
    }
    if (accept_op("(")) {
      if (accept_op(")")) return make(Expr::Type::Tuple);
      ExprPtr first = expression();
      if (accept_op(")")) return first;
      auto tup = make(Expr::Type::Tuple);
      tup->children.push_back(std::move(first));
      while (accept_op(",")) {
        if (is_op(")")) break;
        tup->children.push_back(expression());
      }
      expect_op(")");
      return tup;
    }
    if (accept_op("[")) {
      auto l = make(Expr::Type::List);
      while (!accept_op("]")) {
        l->children.push_back(expression());
        if (!is_op("]")) expect_op(",");
      }
      return l;
    }
    if (accept_op("{")) {
      auto d = make(Expr::Type::Dict);
      while (!accept_op("}")) {
        d->children.push_back(expression());
        expect_op(":");
        d->children.push_back(expression());
        if (!is_op("}")) expect_op(",");
      }
      return d;
    }
    fail("unexpected '" + t.text + "'");
  }

  // "a", "a, b", "ns.attr": assignment targets
  std::vector<std::string> targets() {
    std::vector<std::string> out;
    do {
      std::string n = expect_name();
      if (accept_op(".")) n += "." + expect_name();
      out.push_back(n);
    } while (accept_op(","));
    return out;
  }

  size_t pos() const { return i_; }

 private:
  std::vector<Tok> t_;
  size_t i_ = 0;
  int line_;
  int depth_ = 0;
};

// ---------------------------------------------------------------- statements

class StmtParser {
 public:
  explicit StmtParser(std::vector<Segment> segs) : s_(std::move(segs)) {}

  Body parse_until(const std::set<std::string>& ends, std::string* found) {
    if (++depth_ > kMaxSyntaxDepth)
      throw Error("template syntax error at line " + std::to_string(i_ < s_.size() ? s_[i_].line : 0) +
                  ": blocks nested more than " + std::to_string(kMaxSyntaxDepth) + " deep");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    Body body;
    while (i_ < s_.size()) {
      const Segment& seg = s_[i_];
      if (seg.kind == Segment::Text) {
        auto n = node(Node::Type::Text, seg.line);
        n->text = seg.text;
        body.push_back(std::move(n));
        ++i_;
        continue;
      }
      ExprParser p(lex(seg.text, seg.line), seg.line);
      if (seg.kind == Segment::Var) {
        auto n = node(Node::Type::Output, seg.line);
        n->expr = p.expression();
        p.expect_end();
        body.push_back(std::move(n));
        ++i_;
        continue;
      }
      const std::string kw = p.peek().kind == Tok::Name ? p.peek().text : "";
      if (ends.count(kw)) {
        if (found) *found = kw;
        return body;
      }
      ++i_;
      p.expect_name();
      if (kw == "if") body.push_back(parse_if(p, seg.line));
      else if (kw == "for") body.push_back(parse_for(p, seg.line));
      else if (kw == "set") body.push_back(parse_set(p, seg.line));
      else if (kw == "macro") body.push_back(parse_macro(p, seg.line));
      else if (kw == "call") body.push_back(parse_call(p, seg.line));
      else if (kw == "filter") body.push_back(parse_filter(p, seg.line));
      else if (kw == "break" || kw == "continue") {
        p.expect_end();
        body.push_back(node(kw == "break" ? Node::Type::Break : Node::Type::Continue, seg.line));
      } else if (kw == "generation" || kw == "endgeneration") {
        p.expect_end();  // assistant-mask markers of HF templates: no output of their own
      } else {
        throw Error("template syntax error at line " + std::to_string(seg.line) + ": unknown tag '" + kw + "'" +
                    (ends.empty() ? "" : " (expected " + join(ends) + ")"));
      }
    }
    if (!ends.empty()) throw Error("template syntax error: unexpected end of template, expected " + join(ends));
    return body;
  }

 private:
  static std::string join(const std::set<std::string>& s) {
    std::string r;
    for (const auto& x : s) r += (r.empty() ? "'" : " or '") + x + "'";
    return r;
  }
  NodePtr node(Node::Type t, int line) {
    auto n = std::make_unique<Node>(t);
    n->line = line;
    return n;
  }
  // Consumes the closing tag found by parse_until and checks it has nothing after the keyword.
  void close_tag() {
    ExprParser p(lex(s_[i_].text, s_[i_].line), s_[i_].line);
    p.expect_name();
    if (p.peek().kind == Tok::Name) p.expect_name();  // "endmacro name" style
    p.expect_end();
    ++i_;
  }

  NodePtr parse_if(ExprParser& p, int line) {
    auto n = node(Node::Type::If, line);
    ExprPtr cond = p.expression();
    p.expect_end();
    while (true) {
      std::string found;
      Body b = parse_until({"elif", "else", "endif"}, &found);
      n->branches.emplace_back(std::move(cond), std::move(b));
      if (found == "endif") {
        close_tag();
        return n;
      }
      ExprParser q(lex(s_[i_].text, s_[i_].line), s_[i_].line);
      ++i_;
      q.expect_name();
      if (found == "elif") {
        cond = q.expression();
        q.expect_end();
      } else {
        q.expect_end();
        std::string f2;
        Body eb = parse_until({"endif"}, &f2);
        n->branches.emplace_back(nullptr, std::move(eb));
        close_tag();
        return n;
      }
    }
  }

  NodePtr parse_for(ExprParser& p, int line) {
    auto n = node(Node::Type::For, line);
    n->targets = p.targets();
    if (!p.accept_name("in")) p.fail("expected 'in' in for loop");
    n->expr = p.expression(false);
    if (p.accept_name("if")) n->filter = p.expression(false);
    p.accept_name("recursive");
    p.expect_end();
    std::string found;
    n->body = parse_until({"else", "endfor"}, &found);
    if (found == "else") {
      ++i_;
      std::string f2;
      n->else_body = parse_until({"endfor"}, &f2);
    }
    close_tag();
    return n;
  }

  NodePtr parse_set(ExprParser& p, int line) {
    std::vector<std::string> targets = p.targets();
    if (p.accept_op("=")) {
      auto n = node(Node::Type::Set, line);
      n->targets = std::move(targets);
      n->expr = p.expression();
      if (p.is_op(",")) {  // set a, b = x, y
        auto tup = p.make(Expr::Type::Tuple);
        tup->children.push_back(std::move(n->expr));
        while (p.accept_op(",")) tup->children.push_back(p.expression());
        n->expr = std::move(tup);
      }
      p.expect_end();
      return n;
    }
    auto n = node(Node::Type::SetBlock, line);
    n->targets = std::move(targets);
    if (p.is_op("|")) {
      auto holder = p.make(Expr::Type::Literal);
      holder->name = "__block__";  // stands for the rendered body
      n->filter = p.filters_and_tests(std::move(holder));
    }
    p.expect_end();
    std::string found;
    n->body = parse_until({"endset"}, &found);
    close_tag();
    return n;
  }

  void parse_params(ExprParser& p, std::vector<MacroParam>& params) {
    p.expect_op("(");
    while (!p.accept_op(")")) {
      MacroParam mp;
      mp.name = p.expect_name();
      if (p.accept_op("=")) mp.default_value = p.expression();
      params.push_back(std::move(mp));
      if (!p.is_op(")")) p.expect_op(",");
    }
  }

  NodePtr parse_macro(ExprParser& p, int line) {
    auto n = node(Node::Type::Macro, line);
    n->name = p.expect_name();
    parse_params(p, n->params);
    p.expect_end();
    std::string found;
    n->body = parse_until({"endmacro"}, &found);
    close_tag();
    return n;
  }

  NodePtr parse_call(ExprParser& p, int line) {
    auto n = node(Node::Type::CallBlock, line);
    if (p.is_op("(")) parse_params(p, n->params);
    n->expr = p.expression();
    p.expect_end();
    std::string found;
    n->body = parse_until({"endcall"}, &found);
    close_tag();
    return n;
  }

  NodePtr parse_filter(ExprParser& p, int line) {
    auto n = node(Node::Type::FilterBlock, line);
    // the filter chain applies to the block's output, given as a placeholder literal
    auto holder = p.make(Expr::Type::Literal);
    holder->name = "__block__";  // stands for the rendered body
    n->filter = p.filters_and_tests([&] {
      auto f = p.make(Expr::Type::Filter);
      f->name = p.expect_name();
      f->children.push_back(std::move(holder));
      if (p.accept_op("(")) p.call_args(*f);
      return f;
    }());
    p.expect_end();
    std::string found;
    n->body = parse_until({"endfilter"}, &found);
    close_tag();
    return n;
  }

  std::vector<Segment> s_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

std::shared_ptr<Template> parse_template(const std::string& source) {
  auto t = std::make_shared<Template>();
  StmtParser p(segment(source));
  t->body = p.parse_until({}, nullptr);
  return t;
}

}  // namespace lily::jinja
