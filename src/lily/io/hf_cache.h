// The Hugging Face cache's layout, shared with transformers, mlx and the `hf`
// CLI: <cache>/models--Org--Name/{blobs/<hash>, refs/<revision>,
// snapshots/<commit>/<file> -> ../../blobs/<hash>}. `lily pull` writes it;
// the model locator reads it offline.
#pragma once

#include <filesystem>
#include <string>

namespace lily::hf_cache {

// $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub: where huggingface_hub looks.
std::filesystem::path cache_dir();

// Org/Name as the hub spells repository ids: letters, digits, '.', '_' and
// '-', at most 96 characters a part, no ".." or "--" (which would break the
// folder name) and no leading or trailing '.' or '-'.
bool is_repo_id(const std::string& text);

// <cache>/models--Org--Name
std::filesystem::path repo_dir(const std::filesystem::path& cache, const std::string& repo_id);

}  // namespace lily::hf_cache
