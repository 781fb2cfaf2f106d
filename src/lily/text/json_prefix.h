// Decides, byte by byte, whether text can still grow into one JSON object:
// the check behind `response_format: json_object`, where each candidate
// token is kept only if the answer stays a valid prefix. It also stops
// endless whitespace, the one way a valid prefix can fail to progress.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lily {

class JsonPrefix {
 public:
  // Feeds bytes; false (and the checker unchanged) when they cannot continue a JSON object.
  bool push(std::string_view bytes);
  // Whether `bytes` could be pushed, without pushing them.
  bool accepts(std::string_view bytes) const;
  // The top-level object is closed.
  bool complete() const { return state_ == State::Done; }

  static constexpr int kMaxWhitespaceRun = 8;

 private:
  enum class State : uint8_t {
    Start,          // before the top-level '{'
    KeyOrEnd,       // after '{'
    Key,            // after ',' in an object
    Colon,          // after a key
    Value,          // a value must come
    ValueOrEnd,     // after '['
    AfterValue,     // ',' or the container's end
    String,         // inside a string
    Escape,         // after a backslash
    Unicode,        // inside \uXXXX
    Number,         // inside a number (see num_)
    Literal,        // inside true / false / null
    Done,
  };
  bool step(char c);
  bool end_value();
  bool number_step(char c, bool* consumed);

  State state_ = State::Start;
  std::vector<char> stack_;  // '{' or '['
  bool string_is_key_ = false;
  int unicode_left_ = 0;
  int unicode_first_ = 0, unicode_second_ = 0;  // the first two hex digits of a \u escape
  bool low_surrogate_due_ = false;               // after \uD800-\uDBFF
  int utf8_left_ = 0;                     // continuation bytes the current character still needs
  unsigned char utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // the range of the next one
  uint8_t num_ = 0;               // number sub-state
  std::string_view literal_rest_; // what a literal still needs
  int whitespace_run_ = 0;
};

}  // namespace lily
