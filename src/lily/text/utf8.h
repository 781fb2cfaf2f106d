// UTF-8 helpers: validation and the length of the complete prefix of a byte
// stream, which the streaming detokenizer needs to never emit half a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lily {

// Offset of the first byte that starts an invalid sequence, or npos when `s` is valid UTF-8.
size_t find_invalid_utf8(std::string_view s);

// Length of the longest prefix of `s` that does not end inside an incomplete
// multi-byte sequence (invalid bytes count as complete, so they never stall output).
size_t complete_utf8_prefix(std::string_view s);

// `s` with each invalid byte replaced by U+FFFD.
std::string replace_invalid_utf8(std::string_view s);

// Appends the UTF-8 encoding of code point `cp`.
void append_utf8(std::string& out, char32_t cp);

// NFC normalisation (utf8proc); `s` must be valid UTF-8.
std::string nfc(std::string_view s);

}  // namespace lily
