#include "lily/io/model_locator.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "lily/error.h"
#include "lily/io/gguf.h"
#include "lily/io/hf_cache.h"

namespace lily {

namespace fs = std::filesystem;

namespace {
// A snapshot of a GGUF repository has no config.json: its model is its one
// GGUF file, or the first part of its one split set.
std::string gguf_in_snapshot(const fs::path& snap, const std::string& repo) {
  std::vector<std::string> models;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snap, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 5 || name.compare(name.size() - 5, 5, ".gguf") != 0) continue;
    const size_t of = name.find("-of-");
    const bool later_part = of != std::string::npos && of >= 5 && name.compare(of - 5, 5, "00001") != 0;
    if (!later_part) models.push_back(it->path().string());
  }
  std::sort(models.begin(), models.end());
  if (models.size() == 1) return models[0];
  if (models.empty()) return "";
  std::string list;
  for (const auto& m : models) list += "\n  " + m;
  throw Error("model '" + repo + "' holds " + std::to_string(models.size()) +
              " GGUF models; name the file to use:" + list);
}
}  // namespace

std::string locate_model(const std::string& arg) {
  if (fs::is_directory(arg)) return arg;
  std::error_code ec;
  if (fs::is_regular_file(arg, ec) && is_gguf_file(arg)) return arg;  // a GGUF file, a split part or an Ollama blob
  if (!hf_cache::is_repo_id(arg))
    throw Error("model '" + arg + "' is not a directory, a GGUF file or a Hugging Face repo id (Org/Name)");
  const fs::path repo = hf_cache::repo_dir(hf_cache::cache_dir(), arg);
  const std::string how = "Download it first with `lily pull " + arg +
                          "` (running, chatting and serving never download), or pass the path of a local checkpoint.";
  if (!fs::is_directory(repo))
    throw Error("model '" + arg + "' is not in the Hugging Face cache (looked for " + repo.string() + "). " + how);
  std::string rev;
  std::ifstream ref(repo / "refs" / "main");
  if (ref) std::getline(ref, rev);
  fs::path snap;
  if (!rev.empty() && rev.find('/') == std::string::npos && fs::is_directory(repo / "snapshots" / rev)) {
    snap = repo / "snapshots" / rev;
  } else if (fs::is_directory(repo / "snapshots")) {
    for (const auto& e : fs::directory_iterator(repo / "snapshots"))
      if (e.is_directory()) snap = e.path();  // no refs/main: the only (or last) snapshot
  }
  if (!snap.empty() && fs::exists(snap / "config.json")) return snap.string();
  if (!snap.empty())
    if (std::string gguf = gguf_in_snapshot(snap, arg); !gguf.empty()) return gguf;
  throw Error("model '" + arg + "' is only partly in the Hugging Face cache (" + repo.string() +
              " has no snapshot with a config.json or a GGUF file). " + how);
}

}  // namespace lily
