// The part of the Hugging Face hub's HTTP API that a download needs: a
// repository's file list at a revision (with each file's size and hash), and
// a file's bytes from an offset through the hub's `resolve` URLs and their
// redirects. Everything the hub answers is checked before it is used: file
// names become paths in the cache, hashes become file names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lily/net/http_client.h"

namespace lily::hub {

struct RepoFile {
  std::string path;        // inside the repository, '/'-separated, checked to stay inside it
  uint64_t size = 0;
  std::string hash;        // the blob's name: the LFS sha256, else git's blob sha1 (hex)
  bool lfs = false;        // whether `hash` is a sha256 of the content (else a git blob sha1)
};

struct RepoInfo {
  std::string commit;      // 40 hex digits
  std::vector<RepoFile> files;
};

class HubClient {
 public:
  // `endpoint`: https://huggingface.co or a mirror ($HF_ENDPOINT); `token`:
  // sent only to the endpoint's own origin, never to a redirect's elsewhere.
  HubClient(const std::string& endpoint, std::string token, double idle_timeout_s);

  // The files of `repo` at `revision`. Throws lily::Error saying what the
  // hub answered (401 and 403 name HF_TOKEN, 404 the revision) or what in its
  // answer is malformed.
  RepoInfo repo_info(const std::string& repo, const std::string& revision) const;

  // Starts reading a file at `commit` from byte `offset` (a Range request
  // when offset > 0), following up to 5 redirects. The call's head is read;
  // its status says whether the range was honoured (206), ignored (200) or
  // past the end (416). Never throws: a failure is in the call's result().
  std::unique_ptr<net::HttpCall> open_file(const std::string& repo, const std::string& commit, const std::string& path,
                                           uint64_t offset) const;

  const std::string& endpoint() const { return endpoint_text_; }

 private:
  net::Url endpoint_;
  std::string endpoint_text_, token_;
  double idle_timeout_s_;
  net::HttpClient client_;
};

// Checks a path the hub names: relative, '/'-separated, no empty, "." or ".."
// part, no backslash or control character, at most 1024 bytes.
bool is_safe_repo_path(const std::string& path);

}  // namespace lily::hub
