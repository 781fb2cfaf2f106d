// Reading the small files a checkpoint brings (config.json, tokenizer.json,
// chat templates, shard indexes) and JSON from any source, within bounds:
// a FIFO or device in place of a file, a file far larger than any real one,
// or JSON nested deeper than any real document is refused with an error
// that names the source, before it can hang, exhaust memory or overflow the
// stack of code that walks the document recursively.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lily {

// Real configs, tokenizers and tool schemas nest a few levels; this is far above them.
inline constexpr int kMaxJsonDepth = 64;

// The whole of a regular file of at most `max_bytes`. Throws lily::Error
// naming `path` when it is missing, unreadable, not a regular file, or larger.
std::string read_regular_file(const std::string& path, size_t max_bytes);

// Throws lily::Error naming `source` when `text` nests arrays and objects
// deeper than `max_depth`. Only brackets outside strings count; whether the
// text is well-formed is left to the parser.
void check_json_depth(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);

// Parses JSON after checking its depth; throws lily::Error naming `source`.
nlohmann::json parse_json(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);
nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& source,
                                          int max_depth = kMaxJsonDepth);

}  // namespace lily
