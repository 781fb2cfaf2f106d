#include "lily/text/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <queue>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/text/utf8.h"

namespace lily {

using nlohmann::json;

struct Tokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() {
    if (code) pcre2_code_free(code);
  }
};

Tokenizer::~Tokenizer() = default;

namespace {

// The largest real tokenizer.json files are tens of MB.
constexpr size_t kMaxTokenizerFileBytes = size_t(256) << 20;
std::string read_text(const std::string& path) { return read_regular_file(path, kMaxTokenizerFileBytes); }

// GPT-2's reversible map from bytes to printable code points.
void build_byte_map(std::string (&to_unicode)[256]) {
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
    to_unicode[b].clear();
    append_utf8(to_unicode[b], cp);
  }
}

std::optional<std::string> token_name(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

// Finds the Split pre-tokenizer's regex; Qwen files nest it in a Sequence.
const json* find_split(const json& pre) {
  if (!pre.is_object()) return nullptr;
  if (pre.value("type", "") == "Split") return &pre;
  if (pre.value("type", "") == "Sequence" && pre.contains("pretokenizers"))
    for (const auto& p : pre["pretokenizers"])
      if (const json* s = find_split(p)) return s;
  return nullptr;
}

bool has_nfc(const json& norm) {
  if (!norm.is_object()) return false;
  const std::string type = norm.value("type", "");
  if (type == "NFC") return true;
  if (type == "Sequence" && norm.contains("normalizers"))
    for (const auto& n : norm["normalizers"])
      if (has_nfc(n)) return true;
  return false;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  auto t = from_json_text(read_text(path), path);
  const auto cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    const json cfg = parse_json(read_text(cfg_path.string()), cfg_path.string());
    if (!cfg.is_object()) throw Error(cfg_path.string() + ": not a JSON object");
    t->eos_token = token_name(cfg, "eos_token");
    t->bos_token = token_name(cfg, "bos_token");
    t->pad_token = token_name(cfg, "pad_token");
  }
  return t;
}

std::unique_ptr<Tokenizer> Tokenizer::from_json_text(const std::string& text, const std::string& source) {
  try {
    return build(text, source);
  } catch (const json::exception& e) {  // a field of the wrong type
    throw Error(source + ": unexpected content: " + e.what());
  }
}

std::unique_ptr<Tokenizer> Tokenizer::build(const std::string& text, const std::string& source) {
  const json j = parse_json(text, source);
  auto fail = [&](const std::string& why) { return Error(source + ": " + why); };
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) throw fail("has no model object");
  const json& model = j["model"];
  if (model.value("type", "") != "BPE") throw fail("model type must be BPE, got " + model.value("type", std::string("none")));
  if (!model.contains("vocab") || !model["vocab"].is_object()) throw fail("model has no vocab");
  if (!model.contains("merges") || !model["merges"].is_array()) throw fail("model has no merges");

  std::unique_ptr<Tokenizer> t(new Tokenizer());
  build_byte_map(t->byte_to_unicode_);
  std::unordered_map<std::string, unsigned char> from_unicode;
  for (int b = 0; b < 256; ++b) from_unicode[t->byte_to_unicode_[b]] = static_cast<unsigned char>(b);

  // Ids index a table, so each is checked before it is used: not negative,
  // and below a bound that a real vocabulary is far from and a table can hold.
  const auto valid_id = [](const json& v) {
    return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxTokenId)) &&
           v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTokenId;
  };
  const std::string id_range = " (ids are integers from 0 to " + std::to_string(kMaxTokenId) + ")";
  int64_t max_id = -1;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!valid_id(it.value())) throw fail("vocab entry '" + it.key() + "' has no valid id" + id_range);
    t->vocab_[it.key()] = it.value().get<int32_t>();
    max_id = std::max<int64_t>(max_id, it.value().get<int64_t>());
  }
  std::vector<AddedToken> added;
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string())
        throw fail("added_tokens entry needs an id and a content");
      if (!valid_id(a["id"]))
        throw fail("added token '" + a["content"].get<std::string>() + "' has id " + a["id"].dump() + id_range);
      const json special = a.contains("special") ? a["special"] : json(false);
      if (!special.is_boolean()) throw fail("added token '" + a["content"].get<std::string>() + "': special must be true or false");
      added.push_back({a["id"].get<int32_t>(), a["content"].get<std::string>(), special.get<bool>()});
      max_id = std::max<int64_t>(max_id, added.back().id);
    }
  }
  // Real vocabularies number their tokens densely; a table far larger than
  // the tokens it holds is a hostile file's way to take memory.
  const int64_t entries = static_cast<int64_t>(t->vocab_.size() + added.size());
  if (max_id >= entries + 65536)
    throw fail("token ids run to " + std::to_string(max_id) + " for only " + std::to_string(entries) + " tokens");
  t->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  t->special_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [tok, id] : t->vocab_) {
    std::string bytes;
    // decode the byte-level string character by character
    for (size_t i = 0; i < tok.size();) {
      size_t n = 1;
      const unsigned char c = static_cast<unsigned char>(tok[i]);
      if (c >= 0xf0) n = 4;
      else if (c >= 0xe0) n = 3;
      else if (c >= 0xc0) n = 2;
      auto f = from_unicode.find(tok.substr(i, n));
      if (f == from_unicode.end()) {
        bytes = tok;  // not a byte-level token; keep it verbatim
        break;
      }
      bytes += static_cast<char>(f->second);
      i += n;
    }
    t->id_to_token_[id] = bytes;
  }
  for (const auto& a : added) {
    t->id_to_token_[a.id] = a.content;
    t->special_[a.id] = a.special;
  }
  std::sort(added.begin(), added.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  added.erase(std::remove_if(added.begin(), added.end(), [](const AddedToken& a) { return a.content.empty(); }),
              added.end());
  t->added_ = std::move(added);

  int32_t rank = 0;
  for (const auto& m : model["merges"]) {
    std::string key;
    if (m.is_string()) {
      key = m.get<std::string>();
      if (key.find(' ') == std::string::npos) throw fail("merge '" + key + "' is not a pair");
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      key = m[0].get<std::string>() + " " + m[1].get<std::string>();
    } else {
      throw fail("malformed merge entry " + m.dump());
    }
    t->merge_rank_.emplace(std::move(key), rank++);
  }

  t->normalize_nfc_ = j.contains("normalizer") && has_nfc(j["normalizer"]);
  const json* split = j.contains("pre_tokenizer") ? find_split(j["pre_tokenizer"]) : nullptr;
  if (split == nullptr) throw fail("has no Split pre-tokenizer (a byte-level BPE regex is required)");
  if (!split->contains("pattern") || !(*split)["pattern"].contains("Regex"))
    throw fail("Split pre-tokenizer has no Regex pattern");
  if (split->value("behavior", "Isolated") != "Isolated" || split->value("invert", false))
    throw fail("only the Isolated, non-inverted Split pre-tokenizer is supported");
  const std::string pattern = (*split)["pattern"]["Regex"].get<std::string>();
  int err = 0;
  PCRE2_SIZE off = 0;
  t->split_ = std::make_unique<Regex>();
  t->split_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, nullptr);
  if (t->split_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw fail("cannot compile the pre-tokenizer regex at offset " + std::to_string(off) + ": " +
               reinterpret_cast<char*>(msg));
  }
  pcre2_jit_compile(t->split_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  return t;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  for (const auto& a : added_)
    if (a.content == token) return a.id;
  std::string mapped;
  for (unsigned char c : token) mapped += byte_to_unicode_[c];
  auto it = vocab_.find(mapped);
  if (it != vocab_.end()) return it->second;
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return std::string();
  return id_to_token_[id];
}

std::string Tokenizer::decode_bytes(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids) s += token_bytes(id);
  return s;
}

void Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(std::string(piece));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::string> sym;
  sym.reserve(piece.size());
  for (unsigned char c : piece) sym.push_back(byte_to_unicode_[c]);
  // Merge the lowest-ranked adjacent pair (leftmost on ties) until none is in
  // the merge table: a heap of candidate pairs over a linked list of symbols,
  // so long pieces cost O(n log n).
  const size_t n = sym.size();
  std::vector<size_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1;  // i - 1 wraps to npos for i = 0
  struct Cand {
    int32_t rank;
    size_t left, right_len, left_len;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  std::string key;
  auto push = [&](size_t l) {
    if (l >= n || next[l] >= n) return;
    const size_t r = next[l];
    key.assign(sym[l]).append(" ").append(sym[r]);
    auto it = merge_rank_.find(key);
    if (it != merge_rank_.end()) heap.push({it->second, l, sym[r].size(), sym[l].size()});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const size_t l = c.left, r = next[l];
    // stale if either side changed since the candidate was pushed
    if (sym[l].empty() || r >= n || sym[l].size() != c.left_len || sym[r].size() != c.right_len) continue;
    sym[l] += sym[r];
    sym[r].clear();
    next[l] = next[r];
    if (next[r] < n) prev[next[r]] = l;
    if (prev[l] < n) push(prev[l]);
    push(l);
  }
  std::vector<std::string> merged;
  for (size_t i = 0; i < n; i = next[i]) merged.push_back(std::move(sym[i]));
  sym = std::move(merged);
  std::vector<int32_t> ids;
  for (const auto& s : sym) {
    auto it = vocab_.find(s);
    if (it == vocab_.end()) throw Error("tokenizer vocabulary has no entry for the byte sequence '" + s + "'");
    ids.push_back(it->second);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() > 200000) cache_.clear();
  cache_.emplace(std::string(piece), std::move(ids));
}

void Tokenizer::encode_ordinary(std::string_view raw, std::vector<int32_t>& out) const {
  if (raw.empty()) return;
  const std::string text = normalize_nfc_ ? nfc(raw) : std::string(raw);
  // Freed however this ends: encode_piece throws for bytes the vocabulary lacks.
  const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
      pcre2_match_data_create_from_pattern(split_->code, nullptr), pcre2_match_data_free);
  pcre2_match_data* md = match.get();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, emitted = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(split_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (b > emitted) encode_piece(std::string_view(text).substr(emitted, b - emitted), out);  // unmatched gap
    if (e > b) encode_piece(std::string_view(text).substr(b, e - b), out);
    emitted = std::max(emitted, e);
    if (e == b) {  // empty match: step over one character
      pos = b + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xc0) == 0x80) ++pos;
    } else {
      pos = e;
    }
  }
  if (emitted < text.size()) encode_piece(std::string_view(text).substr(emitted), out);
}

template <class Gap, class Token>
void Tokenizer::scan_added(std::string_view text, Gap&& gap, Token&& token) const {
  std::vector<size_t> next(added_.size(), 0);
  for (size_t i = 0; i < added_.size(); ++i) next[i] = text.find(added_[i].content);
  size_t cur = 0;
  while (cur < text.size()) {
    size_t best = std::string_view::npos, which = 0;
    for (size_t i = 0; i < added_.size(); ++i) {
      if (next[i] != std::string_view::npos && next[i] < cur) next[i] = text.find(added_[i].content, cur);
      if (next[i] < best) best = next[i], which = i;  // longest first on equal positions (sorted)
    }
    if (best == std::string_view::npos) {
      gap(text.substr(cur));
      return;
    }
    if (best > cur) gap(text.substr(cur, best - cur));
    token(which);
    cur = best + added_[which].content.size();
  }
}

std::vector<int32_t> Tokenizer::encode_with(std::string_view text, bool marked) const {
  const size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) throw Error("input is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  std::vector<int32_t> out;
  scan_added(
      text,
      [&](std::string_view gap) {
        if (marked) encode_ordinary(unmark(gap), out);
        else encode_ordinary(gap, out);
      },
      [&](size_t which) { out.push_back(added_[which].id); });
  return out;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const { return encode_with(text, false); }
std::vector<int32_t> Tokenizer::encode_marked(std::string_view rendered) const { return encode_with(rendered, true); }

namespace {
// U+FDD0, a noncharacter: text never needs it, and no token contains it.
// In marked text, S S stands for S itself, S{n} for added token n, and a
// lone S (set at an edge) for nothing.
constexpr std::string_view kMark = "\xEF\xB7\x90";
}  // namespace

std::string Tokenizer::mark_as_text(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  // A token that the template's next or previous markup could complete
  // across the edge of this text is cut off from it with a lone mark.
  auto completes_across_edge = [&](bool at_start) {
    for (const auto& a : added_) {
      const std::string_view c = a.content;
      for (size_t k = 1; k < c.size(); ++k)
        if (at_start ? text.substr(0, c.size() - k) == c.substr(k) && text.size() >= c.size() - k
                     : text.size() >= k && text.substr(text.size() - k) == c.substr(0, k))
          return true;
    }
    return false;
  };
  if (!text.empty() && completes_across_edge(true)) out += kMark;
  scan_added(
      text,
      [&](std::string_view gap) {
        for (size_t p = 0;;) {
          const size_t m = gap.find(kMark, p);
          out.append(gap.substr(p, m == std::string_view::npos ? std::string_view::npos : m - p));
          if (m == std::string_view::npos) break;
          out.append(kMark).append(kMark);
          p = m + kMark.size();
        }
      },
      [&](size_t which) { out.append(kMark).append("{" + std::to_string(which) + "}"); });
  if (!text.empty() && completes_across_edge(false)) out += kMark;
  return out;
}

std::string Tokenizer::unmark(std::string_view s) const {
  std::string out;
  out.reserve(s.size());
  for (size_t p = 0;;) {
    const size_t m = s.find(kMark, p);
    out.append(s.substr(p, m == std::string_view::npos ? std::string_view::npos : m - p));
    if (m == std::string_view::npos) break;
    p = m + kMark.size();
    if (s.substr(p, kMark.size()) == kMark) {
      out.append(kMark);
      p += kMark.size();
    } else if (p < s.size() && s[p] == '{') {
      const size_t close = s.find('}', p);
      size_t index = 0;
      bool ok = close != std::string_view::npos && close > p + 1 && close - p <= 8;
      for (size_t i = p + 1; ok && i < close; ++i) {
        ok = s[i] >= '0' && s[i] <= '9';
        index = index * 10 + static_cast<size_t>(s[i] - '0');
      }
      if (ok && index < added_.size()) {
        out.append(added_[index].content);
        p = close + 1;
      }
    }
  }
  return out;
}

}  // namespace lily
