#include "lily/hub/pull.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "lily/error.h"
#include "lily/hub/digest.h"
#include "lily/hub/hub_client.h"
#include "lily/hub/progress.h"
#include "lily/io/hf_cache.h"

namespace lily::hub {

namespace fs = std::filesystem;

namespace {

// The hash a blob is named by, computed as its bytes arrive.
class BlobHash {
 public:
  BlobHash(bool lfs, uint64_t size) : lfs_(lfs), size_(size) { reset(); }
  void reset() {
    sha256_ = Sha256();
    sha1_ = Sha1();
    if (!lfs_) sha1_.update("blob " + std::to_string(size_) + std::string(1, '\0'));  // git's blob header
  }
  void update(std::string_view d) { lfs_ ? sha256_.update(d) : sha1_.update(d); }
  std::string hex() { return lfs_ ? sha256_.hex() : sha1_.hex(); }
  const char* name() const { return lfs_ ? "sha256" : "git blob sha1"; }

 private:
  bool lfs_;
  uint64_t size_;
  Sha256 sha256_;
  Sha1 sha1_;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string errno_text() { return std::strerror(errno); }

bool is_valid_revision(const std::string& r) {
  if (r.empty() || r.size() > 256 || r.front() == '/' || r.back() == '/' || r.find("..") != std::string::npos ||
      r.find("//") != std::string::npos)
    return false;
  for (char c : r)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-' || c == '/'))
      return false;
  return true;
}

// Writes `text` to `path` through a temporary file and a rename, so a reader
// sees the old text or the new, never half.
void write_atomically(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f) throw Error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

// snapshots/<commit>/<path> -> ../../blobs/<hash> (one more ../ per folder of the path).
void link_into_snapshot(const fs::path& snapshot, const RepoFile& f) {
  const fs::path link = snapshot / f.path;
  fs::create_directories(link.parent_path());
  std::string target;
  for (size_t i = 0, n = 2 + std::count(f.path.begin(), f.path.end(), '/'); i < n; ++i) target += "../";
  target += "blobs/" + f.hash;
  const fs::path tmp = link.string() + ".lily-link-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp);
  fs::rename(tmp, link);
}

uint64_t file_size_or_zero(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

struct Job {
  const PullOptions& o;
  const HubClient& hub;
  const RepoInfo& info;
  fs::path repo_dir, locks, snapshot;
  Progress& progress;
  std::atomic<uint64_t> fetched{0};
};

// Waits a while for another process's download of the same blob to finish.
void lock_blob(int fd, const std::string& lock_path) {
  for (int i = 0; i < 600; ++i) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return;
    if (errno != EWOULDBLOCK) throw Error("cannot lock " + lock_path + ": " + errno_text());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw Error("another download of this file holds " + lock_path + " (waited 60 s)");
}

// Parses "bytes START-END/TOTAL"; false when malformed.
bool content_range_start(const std::string& value, uint64_t& start) {
  if (value.rfind("bytes ", 0) != 0) return false;
  char* end = nullptr;
  start = std::strtoull(value.c_str() + 6, &end, 10);
  return end != value.c_str() + 6 && *end == '-';
}

// Fetches one file into blobs/<hash>, resuming a partial one; returns
// whether it was already there. Throws lily::Error on failure.
bool fetch(Job& job, const RepoFile& f) {
  const fs::path blob = job.repo_dir / "blobs" / f.hash;
  if (fs::is_regular_file(blob) && file_size_or_zero(blob) == f.size) return true;

  const std::string lock_path = (job.locks / (f.hash + ".lock")).string();
  Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.get() < 0) throw Error("cannot create " + lock_path + ": " + errno_text());
  lock_blob(lock.get(), lock_path);
  if (fs::is_regular_file(blob) && file_size_or_zero(blob) == f.size) return true;  // the other process finished it

  const std::string part = blob.string() + ".incomplete";
  Fd fd(::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) throw Error("cannot create " + part + ": " + errno_text());
  struct stat st {};
  ::fstat(fd.get(), &st);
  uint64_t offset = static_cast<uint64_t>(st.st_size);
  if (offset > f.size) {
    if (::ftruncate(fd.get(), 0) != 0) throw Error("cannot truncate " + part + ": " + errno_text());
    offset = 0;
  }
  // What an earlier attempt left is hashed again before the rest arrives.
  BlobHash hash(f.lfs, f.size);
  {
    std::string buf(1 << 20, '\0');
    for (uint64_t at = 0; at < offset;) {
      const ssize_t n = ::pread(fd.get(), buf.data(), std::min<uint64_t>(buf.size(), offset - at), static_cast<off_t>(at));
      if (n <= 0) throw Error("cannot read " + part + ": " + errno_text());
      hash.update(std::string_view(buf.data(), static_cast<size_t>(n)));
      at += static_cast<uint64_t>(n);
    }
  }
  const int slot = job.progress.begin_file(f.path, f.size, offset);
  std::string why;
  for (int attempt = 1; offset < f.size && attempt <= job.o.attempts; ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(8000, 250 << attempt)));
    auto call = job.hub.open_file(job.o.repo, job.info.commit, f.path, offset);
    const net::HttpResult& r = call->result();
    bool transient = true;
    if (!r.error.empty()) {
      why = r.error;
    } else if (r.status == 200 || r.status == 206) {
      uint64_t start = 0;
      if (r.status == 206 && (!content_range_start(r.header("content-range"), start) || start != offset)) {
        why = "the hub answered a range other than the one asked for (" + r.header("content-range") + ")";
        transient = false;
      } else {
        if (r.status == 200 && offset > 0) {  // the range was ignored: start over
          if (::ftruncate(fd.get(), 0) != 0) throw Error("cannot truncate " + part + ": " + errno_text());
          job.progress.rewind(slot, offset);
          hash.reset();
          offset = 0;
        }
        std::string sink_error;
        const bool whole = call->read_body([&](std::string_view d) {
          if (offset + d.size() > f.size) {
            sink_error = "the hub sent more than the " + std::to_string(f.size) + " bytes it lists";
            return false;
          }
          for (size_t done = 0; done < d.size();) {
            const ssize_t n = ::pwrite(fd.get(), d.data() + done, d.size() - done, static_cast<off_t>(offset + done));
            if (n <= 0) {
              sink_error = "cannot write " + part + ": " + errno_text();
              return false;
            }
            done += static_cast<size_t>(n);
          }
          hash.update(d);
          offset += d.size();
          job.fetched += d.size();
          job.progress.advance(slot, d.size());
          return true;
        });
        if (!sink_error.empty()) {
          why = sink_error;
          transient = false;
        } else if (!whole || offset < f.size) {
          why = call->result().error.empty() ? "the transfer ended early" : call->result().error;
        }
      }
    } else if (r.status == 401 || r.status == 403) {
      why = "the hub refused access (" + std::to_string(r.status) + ")" +
            (job.o.token.empty() ? ": set HF_TOKEN to a token with access" : ": HF_TOKEN has no access");
      transient = false;
    } else if (r.status == 404) {
      why = "the hub lists it but has no such file (404)";
      transient = false;
    } else if (r.status >= 300 && r.status < 400) {
      why = "the hub redirected more than 5 times, or to somewhere that is not http(s)";
      transient = false;
    } else {
      why = "the hub answered " + std::to_string(r.status);
      transient = r.status >= 500 || r.status == 429 || r.status == 408;
    }
    if (!transient) break;
  }
  if (offset < f.size) {
    job.progress.end_file(slot, "failed");
    throw Error(why + (fs::exists(part) ? " (the partial file is kept; pull again to resume)" : ""));
  }
  if (::fsync(fd.get()) != 0) throw Error("cannot flush " + part + ": " + errno_text());
  const std::string got = hash.hex();
  if (got != f.hash) {
    ::unlink(part.c_str());
    job.progress.end_file(slot, "hash mismatch");
    throw Error(std::string("its ") + hash.name() + " is " + got + " but the hub lists " + f.hash +
                ": the download is corrupt and was removed");
  }
  fs::rename(part, blob);
  job.progress.end_file(slot, "done");
  return false;
}

}  // namespace

std::string default_token() {
  if (const char* t = std::getenv("HF_TOKEN"); t && *t) return t;
  fs::path file;
  if (const char* p = std::getenv("HF_TOKEN_PATH"); p && *p) {
    file = p;
  } else if (const char* h = std::getenv("HF_HOME"); h && *h) {
    file = fs::path(h) / "token";
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    file = fs::path(x) / "huggingface" / "token";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    file = fs::path(home) / ".cache" / "huggingface" / "token";
  }
  std::string token;
  std::error_code ec;
  if (!file.empty() && fs::is_regular_file(file, ec) && fs::file_size(file, ec) < 4096) {
    std::ifstream in(file);
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  }
  return token;
}

std::string default_endpoint() {
  const char* e = std::getenv("HF_ENDPOINT");
  return e && *e ? e : "https://huggingface.co";
}

PullResult pull(const PullOptions& o, Progress& progress) {
  if (!hf_cache::is_repo_id(o.repo)) throw Error("'" + o.repo + "' is not a Hugging Face repo id (Org/Name)");
  if (!is_valid_revision(o.revision)) throw Error("'" + o.revision + "' is not a valid revision");
  if (o.jobs < 1 || o.jobs > 64) throw Error("--jobs must be between 1 and 64");
  const HubClient hub(o.endpoint, o.token, o.idle_timeout_s);
  const RepoInfo info = hub.repo_info(o.repo, o.revision);

  std::vector<const RepoFile*> wanted;
  for (const RepoFile& f : info.files) {
    bool take = o.include.empty();
    for (const auto& pattern : o.include) take |= ::fnmatch(pattern.c_str(), f.path.c_str(), 0) == 0;
    if (take) wanted.push_back(&f);
  }
  if (wanted.empty()) {
    std::string names;
    for (size_t i = 0; i < info.files.size() && i < 20; ++i) names += "\n  " + info.files[i].path;
    throw Error(o.include.empty() ? o.repo + " has no files"
                                  : "no file of " + o.repo + " matches --include; it has " +
                                        std::to_string(info.files.size()) + " files:" + names);
  }

  Job job{o, hub, info, hf_cache::repo_dir(o.cache, o.repo), {}, {}, progress};
  job.locks = o.cache / ".locks" / job.repo_dir.filename();
  job.snapshot = job.repo_dir / "snapshots" / info.commit;
  fs::create_directories(job.repo_dir / "blobs");
  fs::create_directories(job.snapshot);
  fs::create_directories(job.locks);
  if (o.revision != info.commit) write_atomically(job.repo_dir / "refs" / o.revision, info.commit);

  // The space still needed, checked before anything is fetched.
  uint64_t needed = 0;
  size_t to_fetch = 0;
  for (const RepoFile* f : wanted) {
    const fs::path blob = job.repo_dir / "blobs" / f->hash;
    if (file_size_or_zero(blob) == f->size && fs::is_regular_file(blob)) continue;
    needed += f->size - std::min(f->size, file_size_or_zero(blob.string() + ".incomplete"));
    ++to_fetch;
  }
  struct statvfs vfs {};
  if (::statvfs((job.repo_dir / "blobs").c_str(), &vfs) == 0) {
    const uint64_t free_bytes = uint64_t(vfs.f_bavail) * vfs.f_frsize;
    if (needed > free_bytes)
      throw Error(o.repo + " needs " + Progress::human_bytes(double(needed)) + " more but " +
                  (job.repo_dir / "blobs").string() + " has " + Progress::human_bytes(double(free_bytes)) + " free");
  }
  progress.start(needed, to_fetch);

  std::atomic<size_t> next{0}, already{0};
  std::mutex failures_mu;
  std::vector<std::string> failures;
  auto worker = [&] {
    for (size_t i; (i = next++) < wanted.size();) {
      const RepoFile& f = *wanted[i];
      try {
        if (fetch(job, f)) ++already;
        link_into_snapshot(job.snapshot, f);
      } catch (const std::exception& e) {
        std::lock_guard lock(failures_mu);
        failures.push_back(f.path + ": " + e.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::min<int>(o.jobs, static_cast<int>(wanted.size())); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  progress.finish();
  if (!failures.empty()) {
    std::string text = std::to_string(failures.size()) + " of " + std::to_string(wanted.size()) + " files of " +
                       o.repo + " failed:";
    for (const auto& f : failures) text += "\n  " + f;
    throw Error(text);
  }
  return {info.commit, job.snapshot, wanted.size(), already.load(), job.fetched.load()};
}

}  // namespace lily::hub
