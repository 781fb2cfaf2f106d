#include "lily/io/hf_cache.h"

#include <cstdlib>

namespace lily::hf_cache {

namespace fs = std::filesystem;

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

bool is_part(const std::string& p) {
  if (p.empty() || p.size() > 96) return false;
  for (char c : p)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  const char first = p.front(), last = p.back();
  return first != '.' && first != '-' && last != '.' && last != '-' && p.find("..") == std::string::npos &&
         p.find("--") == std::string::npos;
}
}  // namespace

fs::path cache_dir() {
  if (std::string c = env("HF_HUB_CACHE"); !c.empty()) return c;
  if (std::string h = env("HF_HOME"); !h.empty()) return fs::path(h) / "hub";
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty()) return fs::path(x) / "huggingface" / "hub";
  return fs::path(env("HOME")) / ".cache" / "huggingface" / "hub";
}

bool is_repo_id(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return false;
  return is_part(text.substr(0, slash)) && is_part(text.substr(slash + 1));
}

fs::path repo_dir(const fs::path& cache, const std::string& repo_id) {
  const size_t slash = repo_id.find('/');
  return cache / ("models--" + repo_id.substr(0, slash) + "--" + repo_id.substr(slash + 1));
}

}  // namespace lily::hf_cache
