#include "lily/text/json_prefix.h"

#include "lily/io/bounded_input.h"

namespace lily {

namespace {
bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

// Number sub-states, after: '-', '0', [1-9]digits, '.', frac digits, 'e', exp sign, exp digits.
enum : uint8_t { kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };
}  // namespace

bool JsonPrefix::accepts(std::string_view bytes) const {
  JsonPrefix copy = *this;
  return copy.push(bytes);
}

bool JsonPrefix::push(std::string_view bytes) {
  JsonPrefix saved = *this;
  for (char c : bytes)
    if (!step(c)) {
      *this = saved;
      return false;
    }
  return true;
}

bool JsonPrefix::end_value() {
  state_ = stack_.empty() ? State::Done : State::AfterValue;
  return true;
}

// Returns false when `c` cannot follow the number's digits so far; *consumed
// is false when `c` ends the number and must be read as what follows it.
bool JsonPrefix::number_step(char c, bool* consumed) {
  *consumed = true;
  switch (num_) {
    case kMinus:
      if (c == '0') return num_ = kZero, true;
      if (is_digit(c)) return num_ = kInt, true;
      return false;
    case kZero:
    case kInt:
      if (num_ == kInt && is_digit(c)) return true;
      if (c == '.') return num_ = kDot, true;
      if (c == 'e' || c == 'E') return num_ = kExp, true;
      break;
    case kDot:
      return is_digit(c) ? (num_ = kFrac, true) : false;
    case kFrac:
      if (is_digit(c)) return true;
      if (c == 'e' || c == 'E') return num_ = kExp, true;
      break;
    case kExp:
      if (c == '+' || c == '-') return num_ = kExpSign, true;
      return is_digit(c) ? (num_ = kExpDigits, true) : false;
    case kExpSign:
      return is_digit(c) ? (num_ = kExpDigits, true) : false;
    case kExpDigits:
      if (is_digit(c)) return true;
      break;
  }
  *consumed = false;  // a complete number ends here
  return true;
}

bool JsonPrefix::step(char c) {
  if (state_ != State::String && state_ != State::Escape && state_ != State::Unicode && state_ != State::Number &&
      state_ != State::Literal && is_ws(c)) {
    return ++whitespace_run_ <= kMaxWhitespaceRun;
  }
  whitespace_run_ = 0;
  switch (state_) {
    case State::Start:
      if (c != '{') return false;
      stack_.push_back('{');
      state_ = State::KeyOrEnd;
      return true;
    case State::KeyOrEnd:
    case State::Key:
      if (c == '}' && state_ == State::KeyOrEnd) {
        stack_.pop_back();
        return end_value();
      }
      if (c != '"') return false;
      string_is_key_ = true;
      state_ = State::String;
      return true;
    case State::Colon:
      if (c != ':') return false;
      state_ = State::Value;
      return true;
    case State::ValueOrEnd:
      if (c == ']') {
        stack_.pop_back();
        return end_value();
      }
      [[fallthrough]];
    case State::Value:
      if (c == '"') {
        string_is_key_ = false;
        state_ = State::String;
      } else if (c == '{' || c == '[') {
        if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) return false;  // what reads the answer walks it recursively
        stack_.push_back(c);
        state_ = c == '{' ? State::KeyOrEnd : State::ValueOrEnd;
      } else if (c == '-' || is_digit(c)) {
        num_ = c == '-' ? kMinus : c == '0' ? kZero : kInt;
        state_ = State::Number;
      } else if (c == 't' || c == 'f' || c == 'n') {
        literal_rest_ = c == 't' ? "rue" : c == 'f' ? "alse" : "ull";
        state_ = State::Literal;
      } else {
        return false;
      }
      return true;
    case State::AfterValue:
      if (c == ',') {
        state_ = stack_.back() == '{' ? State::Key : State::Value;
        return true;
      }
      if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
        stack_.pop_back();
        return end_value();
      }
      return false;
    case State::String: {
      // Strings hold UTF-8: each lead byte sets the range its next byte must be
      // in (no overlong forms, no surrogates, nothing past U+10FFFF).
      const unsigned char u = static_cast<unsigned char>(c);
      if (low_surrogate_due_ && c != '\\') return false;
      if (utf8_left_ > 0) {
        if (u < utf8_lo_ || u > utf8_hi_) return false;
        --utf8_left_;
        utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
        return true;
      }
      if (u >= 0x80) {
        if (u >= 0xC2 && u <= 0xDF) utf8_left_ = 1, utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
        else if (u == 0xE0) utf8_left_ = 2, utf8_lo_ = 0xA0, utf8_hi_ = 0xBF;
        else if (u == 0xED) utf8_left_ = 2, utf8_lo_ = 0x80, utf8_hi_ = 0x9F;
        else if (u >= 0xE1 && u <= 0xEF) utf8_left_ = 2, utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
        else if (u == 0xF0) utf8_left_ = 3, utf8_lo_ = 0x90, utf8_hi_ = 0xBF;
        else if (u >= 0xF1 && u <= 0xF3) utf8_left_ = 3, utf8_lo_ = 0x80, utf8_hi_ = 0xBF;
        else if (u == 0xF4) utf8_left_ = 3, utf8_lo_ = 0x80, utf8_hi_ = 0x8F;
        else return false;  // a continuation byte without its lead, or an invalid lead
        return true;
      }
      if (c == '"') {
        if (string_is_key_) state_ = State::Colon;
        else end_value();
      } else if (c == '\\') {
        state_ = State::Escape;
      } else if (u < 0x20) {
        return false;  // control characters must be escaped
      }
      return true;
    }
    case State::Escape:
      if (low_surrogate_due_ && c != 'u') return false;
      if (c == 'u') {
        unicode_left_ = 4;
        state_ = State::Unicode;
        return true;
      }
      if (std::string_view("\"\\/bfnrt").find(c) == std::string_view::npos) return false;
      state_ = State::String;
      return true;
    case State::Unicode: {
      // Surrogates come in pairs (\uD83D\uDE00): a high one must be followed
      // by a low one, and a low one alone is refused, at the first digit
      // that decides it, so a decoder never writes itself into a dead end.
      if (!is_hex(c)) return false;
      const int h = hex_value(c), pos = 4 - unicode_left_;
      if (pos == 0) unicode_first_ = h;
      if (pos == 1) unicode_second_ = h;
      if (low_surrogate_due_ && ((pos == 0 && h != 0xD) || (pos == 1 && h < 0xC))) return false;
      if (!low_surrogate_due_ && pos == 1 && unicode_first_ == 0xD && h >= 0xC) return false;
      if (--unicode_left_ == 0) {
        low_surrogate_due_ = !low_surrogate_due_ && unicode_first_ == 0xD && unicode_second_ >= 0x8;
        state_ = State::String;
      }
      return true;
    }
    case State::Number: {
      bool consumed;
      if (!number_step(c, &consumed)) return false;
      if (consumed) return true;
      if (num_ == kMinus || num_ == kDot || num_ == kExp || num_ == kExpSign) return false;
      end_value();
      return step(c);
    }
    case State::Literal:
      if (c != literal_rest_.front()) return false;
      literal_rest_.remove_prefix(1);
      if (literal_rest_.empty()) end_value();
      return true;
    case State::Done:
      return false;
  }
  return false;
}

}  // namespace lily
