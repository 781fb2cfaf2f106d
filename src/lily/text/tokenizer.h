// Byte-level BPE tokenizer read from a Hugging Face tokenizer.json: added and
// special tokens matched first, NFC normalisation, the file's own Split
// pre-tokenizer regex (PCRE2 with Unicode properties), byte-to-unicode
// mapping, and merges applied by rank.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lily {

struct AddedToken {
  int32_t id;
  std::string content;
  bool special;
};

class Tokenizer {
 public:
  // The largest token id a tokenizer file may use: above any real
  // vocabulary, and a table of that many entries still fits in memory.
  static constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;

  // Reads tokenizer.json (and, when present beside it, tokenizer_config.json
  // for the bos/eos names). Throws lily::Error naming what is wrong.
  static std::unique_ptr<Tokenizer> load(const std::string& tokenizer_json_path);
  static std::unique_ptr<Tokenizer> from_json_text(const std::string& text, const std::string& source);
  ~Tokenizer();

  // Throws lily::Error on invalid UTF-8.
  // Added and special tokens are matched anywhere in `text`, as Hugging Face does.
  std::vector<int32_t> encode(std::string_view text) const;

  // Text that must never become a control token (a message, a tool result,
  // a tool's description) is marked before it is rendered into a prompt:
  // every added token in it is replaced by an escape that no token matches.
  // encode_marked() then makes control tokens of the template's own markup
  // only, and turns each escape back into its text, encoded as text.
  std::string mark_as_text(std::string_view text) const;
  std::vector<int32_t> encode_marked(std::string_view rendered) const;
  // The rendered prompt as plain text, escapes undone.
  std::string unmark(std::string_view rendered) const;
  // Bytes of the tokens concatenated; may end inside a UTF-8 sequence.
  std::string decode_bytes(const std::vector<int32_t>& ids) const;
  // Bytes of one token ("" for an unknown id).
  std::string token_bytes(int32_t id) const;

  std::optional<int32_t> token_id(std::string_view token) const;  // exact vocab or added token
  size_t vocab_size() const { return id_to_token_.size(); }       // highest id + 1
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  bool is_special(int32_t id) const;

  // From tokenizer_config.json when present.
  std::optional<std::string> eos_token, bos_token, pad_token;

 private:
  Tokenizer() = default;
  static std::unique_ptr<Tokenizer> build(const std::string& text, const std::string& source);
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;
  std::vector<int32_t> encode_with(std::string_view text, bool marked) const;
  // Calls `gap` for the text between added tokens and `token` for each
  // added token (by its index in added_), scanning leftmost, longest first.
  template <class Gap, class Token>
  void scan_added(std::string_view text, Gap&& gap, Token&& token) const;

  struct Regex;
  std::unique_ptr<Regex> split_;
  bool normalize_nfc_ = false;
  std::unordered_map<std::string, int32_t> vocab_;  // byte-level strings -> id
  std::vector<std::string> id_to_token_;            // id -> raw bytes
  std::unordered_map<std::string, int32_t> merge_rank_;  // "a\x01b" -> rank
  std::vector<AddedToken> added_;  // longest first, for matching
  std::vector<bool> special_;
  std::string byte_to_unicode_[256];
  // BPE results of pre-tokenized pieces; encode may run on several threads.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace lily
