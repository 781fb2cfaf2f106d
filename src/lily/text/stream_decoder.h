// Turns generated token ids into text as they arrive, holding back the bytes
// of a character split across tokens so no broken UTF-8 is ever emitted.
#pragma once

#include <cstdint>
#include <string>

#include "lily/text/tokenizer.h"

namespace lily {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}

  // Adds one token; returns the text that is now complete (possibly empty).
  std::string push(int32_t id);
  // Returns what is left at the end of the stream; invalid leftovers become U+FFFD.
  std::string finish();

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace lily
