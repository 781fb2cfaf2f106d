// Any text through the real Qwen3 tokenizer: encoding is lossless up to NFC, and text
// marked as content never yields an added token and comes back unchanged.
#include <cstdlib>

#include "fuzz_support.h"
#include "lily/error.h"
#include "lily/text/tokenizer.h"
#include "lily/text/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok = lily::Tokenizer::load(lily::fuzz::bundled_model_dir() + "/tokenizer.json");
  const std::string_view s = lily::fuzz::text(data, size);
  if (lily::find_invalid_utf8(s) != std::string_view::npos) {
    try {
      tok->encode(s);
      std::abort();  // invalid UTF-8 must be refused
    } catch (const lily::Error&) {
    }
    return 0;
  }
  if (tok->decode_bytes(tok->encode(s)) != lily::nfc(s)) std::abort();  // the tokenizer normalises to NFC
  const std::string marked = tok->mark_as_text(s);
  if (tok->unmark(marked) != s) std::abort();
  for (int32_t id : tok->encode_marked(marked))
    for (const auto& a : tok->added_tokens())
      if (a.id == id) std::abort();  // content never becomes a control token
  return 0;
}
