// A whole checkpoint file held read-only in memory. By default it is mapped:
// tensors are read where they lie in the page cache, nothing is copied, and
// pages are read from disk only when touched. Held "owned", the file is read
// into anonymous memory on huge pages where the kernel gives them: loading
// takes the whole read and the page cache is not shared, but a decode step,
// which streams every weight it uses, then misses the address translation
// caches far less than on a page-cache mapping of 4 KiB pages. A mapped
// model that fits in memory is read ahead in the background, so the first
// answer does not fault its pages in one by one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "lily/io/huge_page_buffer.h"

namespace lily {

enum class Residency { Mapped, Owned };
// The process-wide choice for files opened from now on (--no-mmap: Owned).
void set_residency(Residency r);
Residency residency();

// Whether loaded models read their mapped files ahead (read_ahead_if_it_fits):
// on by default, off for a process that only reads a model's sizes.
void set_read_ahead(bool on);

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

  // Starts reading the mapping into memory on threads of its own, page
  // tables included, so that the first decode steps do not wait on the disk
  // page by page. Closing the file stops them (after at most one chunk
  // each). Nothing for a file read in whole, or one already being read.
  void read_ahead();
  // Whether the reading ahead has gone through the whole file.
  bool read_ahead_done() const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<HugePageBuffer> owned_;  // the bytes when read in (--no-mmap), else null
  std::atomic<size_t> readers_done_{0};  // readers that went through their chunks
  std::vector<std::jthread> readers_;  // the reading ahead, while it runs
};

// Reads the files of one model ahead (MappedFile::read_ahead) where reading
// ahead is on and together they fit in nine tenths of the memory available
// now (free, or held by the page cache): a model that does not fit would
// only push its own pages out. Returns whether it started.
bool read_ahead_if_it_fits(std::span<MappedFile* const> files);

}  // namespace lily
