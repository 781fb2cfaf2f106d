// Anonymous memory aligned to 2 MiB and offered to the kernel for
// transparent huge pages (a hint: without them it is small pages). A stream
// over it misses the address translation caches far less than one over
// 4 KiB pages: checkpoints read with --no-mmap live in one, and the
// bandwidth probe of `lily bench` measures over one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lily {

class HugePageBuffer {
 public:
  // `what` completes the error when the memory cannot be had ("to hold model.safetensors").
  HugePageBuffer(size_t bytes, const std::string& what);
  ~HugePageBuffer();
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Nothing writes it from now on.
  void make_read_only();

 private:
  void* region_ = nullptr;  // over-allocated by 2 MiB so that data_ can be aligned
  size_t region_size_ = 0;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lily
