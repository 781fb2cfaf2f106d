#include "lily/router/detectors.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cctype>
#include <memory>
#include <optional>

#include "lily/error.h"

namespace lily::router {

namespace {

// A compiled pattern, matched without UTF checks (the text may be any bytes)
// and with bounded backtracking, so hostile text costs linear time.
class Pattern {
 public:
  explicit Pattern(const char* source) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source), PCRE2_ZERO_TERMINATED, 0, &err, &offset, nullptr);
    if (!code_) throw Error(std::string("internal: bad detector pattern ") + source);
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
    context_ = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(context_, 1'000'000);
    pcre2_set_depth_limit(context_, 10'000);
  }
  ~Pattern() {
    pcre2_match_context_free(context_);
    pcre2_code_free(code_);
  }
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;

  // Calls fn(begin, end) for each match; stops when fn returns false.
  template <class Fn>
  void each(std::string_view text, Fn&& fn) const {
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
        pcre2_match_data_create_from_pattern(code_, nullptr), pcre2_match_data_free);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0;
    while (pos <= text.size()) {
      const int rc = pcre2_match(code_, subject, text.size(), pos, 0, md.get(), context_);
      if (rc < 0) return;  // no match, or a limit reached on hostile input (the other detectors still run)
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      if (!fn(ov[0], ov[1])) return;
      pos = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
    }
  }
  bool found(std::string_view text) const {
    bool any = false;
    each(text, [&](size_t, size_t) { return !(any = true); });
    return any;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_context* context_ = nullptr;
};

struct Detector {
  const char* kind;
  const char* category;
  bool shape;  // recognised by its shape alone (used on text joined across messages)
  Pattern pattern;
};

const std::array<Detector, 24>& detectors() {
  static const std::array<Detector, 24> all{{
      {"private_key", "user_credentials", true, Pattern("-----BEGIN[A-Z ]{0,20} PRIVATE KEY( BLOCK)?-----")},
      {"aws_access_key_id", "user_credentials", true, Pattern("(?<![A-Z0-9])(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])")},
      {"aws_secret_access_key", "user_credentials", false,
       Pattern("(?i)aws.{0,24}(secret|private).{0,24}[=:]\\s*[\"']?[A-Za-z0-9/+=]{40}")},
      {"github_token", "user_credentials", true, Pattern("\\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")},
      {"gitlab_token", "user_credentials", true, Pattern("\\bglpat-[A-Za-z0-9_-]{20,}")},
      {"anthropic_api_key", "user_credentials", true, Pattern("\\bsk-ant-[A-Za-z0-9_-]{20,}")},
      {"openai_api_key", "user_credentials", true, Pattern("\\bsk-(proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")},
      {"google_api_key", "user_credentials", true, Pattern("\\bAIza[0-9A-Za-z_-]{35}")},
      {"slack_token", "user_credentials", true, Pattern("\\bxox[abposr]-[A-Za-z0-9-]{10,}")},
      {"stripe_key", "user_credentials", true, Pattern("\\b[sr]k_(live|test)_[A-Za-z0-9]{16,}")},
      {"huggingface_token", "user_credentials", true, Pattern("\\bhf_[A-Za-z0-9]{30,}")},
      {"npm_token", "user_credentials", true, Pattern("\\bnpm_[A-Za-z0-9]{36}")},
      {"jwt", "user_credentials", true,
       Pattern("\\beyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}")},
      {"connection_string", "user_credentials", false,
       Pattern("\\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\\s:/@\"']{1,64}:[^\\s@/\"']{1,128}@[^\\s/\"']+")},
      {"password_assignment", "user_credentials", false,
       Pattern("(?i)\\b(password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?token|auth[_-]?token|"
               "client[_-]?secret|private[_-]?key)[\"']?\\s*[:=]\\s*[\"']?[^\\s\"',;]{6,}")},
      {"env_secret", "user_credentials", false,
       Pattern("(?m)^[ \\t]*(export[ \\t]+)?[A-Z][A-Z0-9_]*(SECRET|TOKEN|PASSWORD|PASSWD|API_KEY|APIKEY|PRIVATE_KEY|"
               "ACCESS_KEY|CREDENTIALS?)[A-Z0-9_]*[ \\t]*=[ \\t]*\\S{6,}")},
      {"bearer_token", "user_credentials", false, Pattern("(?i)\\bbearer\\s+[A-Za-z0-9._~+/-]{20,}")},
      {"unix_path", "file_system", false,
       Pattern("(?<![\\w.])(~|/(home|Users|etc|var|root|opt|usr|srv|mnt|tmp|private|Volumes|workspace|data))(/[\\w.@+-]+)+")},
      {"windows_path", "file_system", false, Pattern("\\b[A-Za-z]:\\\\([^\\\\\\s:*?\"<>|]+\\\\)*[^\\\\\\s:*?\"<>|]+")},
      {"file_reference", "file_system", false,
       Pattern("(?<![\\w/])([\\w.-]+/)+[\\w.-]+\\.(c|cc|cpp|cxx|h|hpp|py|js|mjs|ts|tsx|go|rs|java|kt|rb|php|sh|sql|"
               "json|ya?ml|toml|ini|cfg|conf|env|pem|key|csv|db|sqlite)\\b")},
      {"dotfile_reference", "file_system", false,
       Pattern("(?<![\\w])\\.(env|npmrc|netrc|pgpass|ssh/[\\w.-]+|aws/credentials|kube/config|git-credentials|bash_history)\\b")},
      {"shebang", "source_code", false, Pattern("(?m)^#![ \\t]*/[\\w/]+")},
      {"code_block", "source_code", false, Pattern("```[\\w+-]*[ \\t]*\\n([^\\n]*\\n){2,}?[ \\t]*```")},
      {"source_code", "source_code", false,
       Pattern("(?m)^[ \\t]*(#include[ \\t]*[<\"]|import[ \\t]+[\\w.{},* ]+[ \\t]+from[ \\t]+['\"]|from[ \\t]+[\\w.]+[ \\t]+"
               "import[ \\t]|def[ \\t]+\\w+\\(.*\\)[ \\t]*(->[^:]+)?:|(public|private|static)[ \\t]+[\\w<>\\[\\]]+[ \\t]+\\w+\\(|"
               "fn[ \\t]+\\w+\\(|func[ \\t]+\\w+\\(|package[ \\t]+[\\w.]+;?[ \\t]*$)")},
  }};
  return all;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

std::string decode_base64(std::string_view s) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = base64_value(c);
    if (v < 0) break;  // '=' padding ends it
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string decode_hex(std::string_view s) {
  std::string out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(static_cast<char>(hex_value(s[i]) * 16 + hex_value(s[i + 1])));
  return out;
}

// Decoded text worth scanning: mostly printable (a secret in base64 is text).
bool looks_like_text(std::string_view s) {
  if (s.size() < 8) return false;
  size_t printable = 0;
  for (unsigned char c : s) printable += (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\r' || c == '\t' || c >= 0x80;
  return printable * 10 >= s.size() * 9;
}

void scan(std::string_view text, const std::string& where, std::vector<Finding>& out, int depth) {
  for (const Detector& d : detectors())
    if (d.pattern.found(text)) out.push_back({d.category, d.kind, where});
  if (depth >= 2) return;
  // Encoded text: each long enough run, decoded and scanned again.
  static const Pattern base64("[A-Za-z0-9+/_-]{20,}={0,2}");
  static const Pattern hex("(?<![0-9A-Fa-f])([0-9A-Fa-f]{2}){12,}(?![0-9A-Fa-f])");
  size_t budget = size_t(4) << 20;  // decoded bytes per level: bounds the work on hostile input
  auto rescan = [&](const std::string& decoded, const char* how) {
    if (decoded.size() > budget || !looks_like_text(decoded)) return true;
    budget -= decoded.size();
    scan(decoded, where + " (" + how + ")", out, depth + 1);
    return true;
  };
  hex.each(text, [&](size_t b, size_t e) { return rescan(decode_hex(text.substr(b, e - b)), "hex"); });
  base64.each(text, [&](size_t b, size_t e) { return rescan(decode_base64(text.substr(b, e - b)), "base64"); });
}

}  // namespace

void scan_text(std::string_view text, const std::string& where, std::vector<Finding>& out) {
  scan(text, where, out, 0);
}

void scan_joined(std::string_view text, const std::string& where, std::vector<Finding>& out) {
  for (const Detector& d : detectors())
    if (d.shape && d.pattern.found(text)) out.push_back({d.category, d.kind, where});
}

}  // namespace lily::router
