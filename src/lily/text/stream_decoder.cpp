#include "lily/text/stream_decoder.h"

#include "lily/text/utf8.h"

namespace lily {

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_bytes(id);
  const size_t n = complete_utf8_prefix(pending_);
  std::string out = replace_invalid_utf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out;
  if (!pending_.empty()) out = "\xEF\xBF\xBD";
  pending_.clear();
  return out;
}

}  // namespace lily
