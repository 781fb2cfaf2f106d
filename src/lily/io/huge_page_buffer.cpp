#include "lily/io/huge_page_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "lily/error.h"

namespace lily {

HugePageBuffer::HugePageBuffer(size_t bytes, const std::string& what) : size_(bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  region_size_ = bytes + kHuge;
  region_ = ::mmap(nullptr, region_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region_ == MAP_FAILED)
    throw Error("cannot allocate " + std::to_string(bytes >> 20) + " MiB " + what + ": " + std::strerror(errno));
  data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(region_) + kHuge - 1) & ~(kHuge - 1));
#ifdef MADV_HUGEPAGE
  ::madvise(data_, size_, MADV_HUGEPAGE);
#endif
}

HugePageBuffer::~HugePageBuffer() { ::munmap(region_, region_size_); }

void HugePageBuffer::make_read_only() { ::mprotect(data_, size_, PROT_READ); }

}  // namespace lily
