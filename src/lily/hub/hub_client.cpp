#include "lily/hub/hub_client.h"

#include <nlohmann/json.hpp>

#include "lily/error.h"
#include "lily/io/bounded_input.h"

namespace lily::hub {

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxRepoInfoBytes = uint64_t(32) << 20;
constexpr size_t kMaxFiles = 100000;
constexpr uint64_t kMaxFileBytes = uint64_t(4) << 40;  // 4 TiB: far above any one file of a checkpoint

bool is_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// What the hub said, fit for an error message: printable ASCII, bounded.
std::string printable(const std::string& text, size_t max = 300) {
  std::string out;
  for (char c : text.substr(0, max)) out += (c >= ' ' && c < 0x7f) ? c : ' ';
  return out;
}

}  // namespace

bool is_safe_repo_path(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path.front() == '/') return false;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    const std::string part = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  for (unsigned char c : path)
    if (c < ' ' || c == 0x7f || c == '\\') return false;
  return true;
}

HubClient::HubClient(const std::string& endpoint, std::string token, double idle_timeout_s)
    : endpoint_(net::Url::parse(endpoint, "the hub endpoint (HF_ENDPOINT)")),
      endpoint_text_(endpoint),
      token_(std::move(token)),
      idle_timeout_s_(idle_timeout_s) {
  if (!endpoint_text_.empty() && endpoint_text_.back() == '/') endpoint_text_.pop_back();
  if (!endpoint_.target.empty() && endpoint_.target.back() == '/') endpoint_.target.pop_back();
  if (token_.find_first_of("\r\n") != std::string::npos) throw Error("HF_TOKEN holds a line break");
}

RepoInfo HubClient::repo_info(const std::string& repo, const std::string& revision) const {
  net::Url url = endpoint_;
  url.target += "/api/models/" + repo + "/revision/" + net::percent_encode(revision, false) + "?blobs=true";
  net::Headers headers = {{"Accept", "application/json"}};
  if (!token_.empty()) headers.emplace_back("Authorization", "Bearer " + token_);
  net::HttpLimits limits;
  limits.timeout_s = 0;
  limits.idle_timeout_s = idle_timeout_s_;
  limits.max_body_bytes = kMaxRepoInfoBytes;
  auto call = client_.start("GET", url, headers, "", limits);
  std::string body;
  const bool read = call->result().error.empty() && call->read_body([&](std::string_view d) {
    body.append(d);
    return true;
  });
  const net::HttpResult& r = call->result();
  const std::string where = repo + " (" + endpoint_text_ + ")";
  if (!r.error.empty()) throw Error("cannot read the file list of " + where + ": " + r.error);
  std::string said = r.header("x-error-message");
  if (said.empty()) said = printable(body, 200);
  if (r.status == 401)
    throw Error(token_.empty() ? "the hub asks for a token to read " + where +
                                     " (a gated or private repository, or one that does not exist): set HF_TOKEN to a "
                                     "token with access"
                               : "the hub refused HF_TOKEN for " + where + ": " + printable(said));
  if (r.status == 403)
    throw Error("HF_TOKEN has no access to " + where +
                " (for a gated repository, accept its conditions on its page first): " + printable(said));
  if (r.status == 404) throw Error("no revision '" + revision + "' of " + where + " on the hub: " + printable(said));
  if (r.status != 200 || !read) throw Error("the hub answered " + std::to_string(r.status) + " for " + where + ": " + printable(said));

  const json info = parse_json(body, "the file list of " + where);
  RepoInfo out;
  if (!info.is_object() || !info.contains("sha") || !info["sha"].is_string() || !is_hex(info["sha"].get<std::string>(), 40))
    throw Error("the file list of " + where + " has no commit (\"sha\" of 40 hex digits)");
  out.commit = info["sha"].get<std::string>();
  if (!info.contains("siblings") || !info["siblings"].is_array())
    throw Error("the file list of " + where + " has no \"siblings\" array");
  if (info["siblings"].size() > kMaxFiles)
    throw Error(where + " lists " + std::to_string(info["siblings"].size()) + " files, more than " +
                std::to_string(kMaxFiles));
  for (const json& s : info["siblings"]) {
    RepoFile f;
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string())
      throw Error("the file list of " + where + " has an entry without a file name");
    f.path = s["rfilename"].get<std::string>();
    if (!is_safe_repo_path(f.path))
      throw Error("the file list of " + where + " names an unsafe path '" + printable(f.path, 200) +
                  "' (absolute, with '..', or with control characters): refused");
    const json* lfs = s.contains("lfs") && s["lfs"].is_object() ? &s["lfs"] : nullptr;
    const json* size = lfs && lfs->contains("size") ? &(*lfs)["size"] : s.contains("size") ? &s["size"] : nullptr;
    if (!size || !size->is_number_unsigned() || size->get<uint64_t>() > kMaxFileBytes)
      throw Error("the file list of " + where + " gives no valid size for " + f.path +
                  " (a hub that does not answer ?blobs=true cannot be pulled from)");
    f.size = size->get<uint64_t>();
    if (lfs) {
      f.lfs = true;
      f.hash = lfs->contains("sha256") && (*lfs)["sha256"].is_string() ? (*lfs)["sha256"].get<std::string>() : "";
      if (!is_hex(f.hash, 64)) throw Error("the file list of " + where + " gives no valid sha256 for " + f.path);
    } else {
      f.hash = s.contains("blobId") && s["blobId"].is_string() ? s["blobId"].get<std::string>() : "";
      if (!is_hex(f.hash, 40)) throw Error("the file list of " + where + " gives no valid blobId for " + f.path);
    }
    out.files.push_back(std::move(f));
  }
  return out;
}

std::unique_ptr<net::HttpCall> HubClient::open_file(const std::string& repo, const std::string& commit,
                                                    const std::string& path, uint64_t offset) const {
  net::Url url = endpoint_;
  url.target += "/" + repo + "/resolve/" + commit + "/" + net::percent_encode(path, true);
  net::HttpLimits limits;
  limits.timeout_s = 0;  // a large file takes as long as it takes, while it moves
  limits.idle_timeout_s = idle_timeout_s_;
  limits.max_body_bytes = kMaxFileBytes;
  std::unique_ptr<net::HttpCall> call;
  for (int hop = 0; hop <= 5; ++hop) {
    net::Headers headers = {{"Accept-Encoding", "identity"}};
    if (offset > 0) headers.emplace_back("Range", "bytes=" + std::to_string(offset) + "-");
    // The token is for the hub; a CDN the hub redirects to gets a signed URL instead.
    if (!token_.empty() && url.origin() == endpoint_.origin())
      headers.emplace_back("Authorization", "Bearer " + token_);
    call = client_.start("GET", url, headers, "", limits);
    const int status = call->result().status;
    if (!call->result().error.empty() || status < 300 || status >= 400 || status == 304) return call;
    const std::string location = call->result().header("location");
    if (location.empty()) return call;
    try {
      url = url.resolve(location);
    } catch (const Error&) {
      return call;  // the caller reports the redirect's status
    }
  }
  return call;
}

}  // namespace lily::hub
