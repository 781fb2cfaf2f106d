// tokenizer.json, then a text through whatever tokenizer it made.
#include "fuzz_support.h"
#include "lily/error.h"
#include "lily/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto t = lily::Tokenizer::from_json_text(std::string(lily::fuzz::text(data, size)), "tokenizer.json");
    const auto ids = t->encode("Hello <|im_end|> wörld 123 \xF0\x9F\x98\x80");
    t->decode_bytes(ids);
    t->encode_marked(t->mark_as_text("<x> text <|im_start|>"));
  } catch (const lily::Error&) {
  }
  return 0;
}
