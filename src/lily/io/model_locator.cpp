#include "lily/io/model_locator.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "lily/error.h"
#include "lily/io/gguf.h"

namespace lily {

namespace fs = std::filesystem;

namespace {
std::string hub_cache_dir() {
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) return c;
  if (const char* h = std::getenv("HF_HOME"); h && *h) return (fs::path(h) / "hub").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home ? home : "") / ".cache" / "huggingface" / "hub").string();
}

bool looks_like_repo_id(const std::string& s) {
  const size_t slash = s.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < s.size() && s.find('/', slash + 1) == std::string::npos &&
         s[0] != '.' && s.find("..") == std::string::npos;
}
}  // namespace

std::string locate_model(const std::string& arg) {
  if (fs::is_directory(arg)) return arg;
  std::error_code ec;
  if (fs::is_regular_file(arg, ec) && is_gguf_file(arg)) return arg;  // a GGUF file, a split part or an Ollama blob
  if (!looks_like_repo_id(arg)) throw Error("model '" + arg + "' is not a directory or a Hugging Face repo id (Org/Name)");
  const std::string cache = hub_cache_dir();
  const size_t slash = arg.find('/');
  const fs::path repo = fs::path(cache) / ("models--" + arg.substr(0, slash) + "--" + arg.substr(slash + 1));
  const std::string how = "Lily never downloads. Fetch it first, for example with `hf download " + arg +
                          "` (huggingface_hub), or pass the path of a local checkpoint directory.";
  if (!fs::is_directory(repo))
    throw Error("model '" + arg + "' is not in the Hugging Face cache (looked for " + repo.string() + "). " + how);
  std::string rev;
  std::ifstream ref(repo / "refs" / "main");
  if (ref) std::getline(ref, rev);
  fs::path snap;
  if (!rev.empty() && fs::is_directory(repo / "snapshots" / rev)) {
    snap = repo / "snapshots" / rev;
  } else if (fs::is_directory(repo / "snapshots")) {
    for (const auto& e : fs::directory_iterator(repo / "snapshots"))
      if (e.is_directory()) snap = e.path();  // no refs/main: the only (or last) snapshot
  }
  if (snap.empty() || !fs::exists(snap / "config.json"))
    throw Error("model '" + arg + "' is only partly in the Hugging Face cache (" + repo.string() + " has no complete snapshot). " + how);
  return snap.string();
}

}  // namespace lily
