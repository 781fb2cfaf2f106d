// What the libFuzzer harnesses share: the input as text, a scratch file on
// tmpfs for the readers that take a path, and the bundled model for the
// parsers that need a tokenizer or an engine. A harness accepts lily::Error
// (and the server's ApiError) as the right answer to bad input; anything
// else that escapes, and every crash, hang or sanitizer report, is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lily::fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Writes `bytes` to `name` in a directory of this process's own; returns the path.
std::string scratch_file(const std::string& name, std::string_view bytes);
std::string scratch_dir();

// The model shipped with Lily (set at build time).
std::string bundled_model_dir();

}  // namespace lily::fuzz
