#include "lily/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "lily/error.h"

namespace lily {

namespace {
std::atomic<Residency> g_residency{Residency::Mapped};

// Reads the whole file into memory of its own, dropping each chunk from the
// page cache once copied so the file is not held twice.
std::unique_ptr<HugePageBuffer> read_owned(int fd, const std::string& path, size_t size) {
  constexpr size_t kChunk = size_t{64} << 20;
  auto buf = std::make_unique<HugePageBuffer>(size, "to hold " + path);
  for (size_t off = 0; off < size;) {
    const ssize_t n = ::pread(fd, buf->data() + off, std::min(kChunk, size - off), static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error("cannot read " + path + " at byte " + std::to_string(off) + ": " +
                  (n < 0 ? std::strerror(errno) : "the file ended early"));
#ifdef POSIX_FADV_DONTNEED
    ::posix_fadvise(fd, static_cast<off_t>(off), n, POSIX_FADV_DONTNEED);
#endif
    off += static_cast<size_t>(n);
  }
  buf->make_read_only();  // weights are never written
  return buf;
}
}  // namespace

void set_residency(Residency r) { g_residency = r; }
Residency residency() { return g_residency; }

namespace {
std::atomic<bool> g_read_ahead{true};

// Bytes of memory available to take now: MemAvailable where /proc says it
// (free memory plus what the page cache would give back), else half the RAM.
size_t memory_available() {
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    std::fclose(f);
    if (kb > 0) return static_cast<size_t>(kb) * 1024;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) / 2 : 0;
}
}  // namespace

void set_read_ahead(bool on) { g_read_ahead = on; }

bool read_ahead_if_it_fits(std::span<MappedFile* const> files) {
  if (!g_read_ahead) return false;
  size_t total = 0;
  for (const MappedFile* f : files) total += f->size();
  if (total > memory_available() / 10 * 9) return false;
  for (MappedFile* f : files) f->read_ahead();
  return true;
}

namespace {
constexpr size_t kAheadChunk = size_t{16} << 20;  // the most a close waits for
constexpr size_t kAheadReaders = 4;
}  // namespace

void MappedFile::read_ahead() {
  if (owned_ || !data_ || !readers_.empty()) return;
  // A few readers, each a chunk in turn, keep several reads in flight: one
  // alone leaves a fast disk waiting between its requests.
  for (size_t first = 0; first < kAheadReaders; ++first)
    readers_.emplace_back([this, first](std::stop_token stop) {
      for (size_t off = first * kAheadChunk; off < size_ && !stop.stop_requested(); off += kAheadReaders * kAheadChunk) {
        const size_t n = std::min(kAheadChunk, size_ - off);
        auto* p = const_cast<uint8_t*>(data_) + off;
#ifdef MADV_POPULATE_READ
        if (::madvise(p, n, MADV_POPULATE_READ) == 0) continue;  // reads and maps the pages in one call
#endif
        const long page = ::sysconf(_SC_PAGESIZE);
        volatile uint8_t sink = 0;
        for (size_t q = 0; q < n; q += static_cast<size_t>(page > 0 ? page : 4096)) sink = sink + p[q];
      }
      if (!stop.stop_requested()) readers_done_.fetch_add(1);
    });
}

bool MappedFile::read_ahead_done() const { return readers_done_.load() == kAheadReaders; }

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO in place of a checkpoint must not wait for a writer (it is refused below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error("cannot stat " + path + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + " is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0 && residency() == Residency::Owned) {
    try {
      owned_ = read_owned(fd, path, size_);
    } catch (...) {
      ::close(fd);
      throw;
    }
    data_ = owned_->data();
  } else if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw Error("cannot map " + path + ": " + std::strerror(e));
    }
    // Asks for huge pages: where the kernel reads the file into the page
    // cache through this mapping, it then uses 2 MiB folios and maps them
    // whole, and a decode step streaming the weights misses the address
    // translation caches far less. Pages cached earlier in small folios stay
    // small; a hint, ignored where not supported.
#ifdef MADV_HUGEPAGE
    ::madvise(p, size_, MADV_HUGEPAGE);
#endif
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
  for (std::jthread& r : readers_) r.request_stop();
  readers_.clear();  // joins them, before the mapping goes
  if (data_ != nullptr && !owned_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace lily
