#include "lily/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
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
  if (data_ != nullptr && !owned_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace lily
