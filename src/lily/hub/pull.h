// `lily pull`: a Hugging Face repository into the Hugging Face cache, the
// way huggingface_hub lays it out, so transformers, mlx, the `hf` CLI and
// Lily's offline lookup all see the same files. Files download several at
// a time; a partial file (<hash>.incomplete) is resumed with a Range
// request, after a dropped connection or an earlier run; each file is
// hashed as it arrives and linked into the snapshot only once its hash is
// the one the hub lists.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lily::hub {

class Progress;

struct PullOptions {
  std::string repo;                   // Org/Name
  std::string revision = "main";      // a branch, a tag or a commit
  std::vector<std::string> include;   // fnmatch patterns over repository paths; empty: every file
  std::string endpoint = "https://huggingface.co";
  std::string token;                  // sent to the endpoint only
  std::filesystem::path cache;        // the hub cache folder
  int jobs = 8;                       // files at once
  int attempts = 5;                   // per file, for connection failures and 5xx answers
  double idle_timeout_s = 60;         // a transfer with no byte for this long is retried
};

struct PullResult {
  std::string commit;
  std::filesystem::path snapshot;
  size_t files = 0;           // in the snapshot from this pull
  size_t already = 0;         // of those, present before it
  uint64_t bytes_fetched = 0; // over the network
};

// Throws lily::Error naming every file that failed (the others stay linked
// and are not fetched again by the next pull).
PullResult pull(const PullOptions& options, Progress& progress);

// The token huggingface_hub would use: $HF_TOKEN, else the file at
// $HF_TOKEN_PATH, else <HF_HOME>/token; "" when none.
std::string default_token();

// The hub's address: $HF_ENDPOINT, else https://huggingface.co.
std::string default_endpoint();

}  // namespace lily::hub
