// A whole checkpoint file held read-only in memory. By default it is mapped:
// tensors are read where they lie in the page cache, nothing is copied, and
// pages are read from disk only when touched. Held "owned", the file is read
// into anonymous memory on huge pages where the kernel gives them: loading
// takes the whole read and the page cache is not shared, but a decode step,
// which streams every weight it uses, then misses the address translation
// caches far less than on a page-cache mapping of 4 KiB pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lily/io/huge_page_buffer.h"

namespace lily {

enum class Residency { Mapped, Owned };
// The process-wide choice for files opened from now on (--no-mmap: Owned).
void set_residency(Residency r);
Residency residency();

class MappedFile {
 public:
  // Maps or reads `path` (see residency()); throws lily::Error naming the file when it cannot.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<HugePageBuffer> owned_;  // the bytes when read in (--no-mmap), else null
};

}  // namespace lily
