// Storage for the CPU backend's activations, kept for reuse. A prompt's
// activations are megabytes each (512 tokens of a 12,288-wide projection
// are 24 MiB), which the C library maps fresh from the system and unmaps on
// release: every layer then paid the kernel's page faults and zeroing again,
// a quarter of a prompt's time. Blocks of a size class that were given back
// are handed out again as they are: like the GPU's buffers they are not
// cleared, since every op writes all of its output. Small ones (where the C
// library's own reuse works) are not pooled.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace lily::cpu {

class TensorPool {
 public:
  // At most `keep_bytes` of given-back blocks are held for reuse.
  explicit TensorPool(size_t keep_bytes);

  // `floats` floats (their values unspecified), owned by the returned pointer: when the last
  // copy goes, the block comes back to the pool (if it still exists and has
  // room) or to the system.
  std::shared_ptr<float> take(size_t floats);

  // Bytes held for reuse now.
  size_t kept_bytes() const;

  // Blocks below this many bytes are left to the C library.
  static constexpr size_t kMinPooled = size_t{256} << 10;

 private:
  struct Shelf;
  std::shared_ptr<Shelf> shelf_;  // also held by each pooled block's deleter
};

}  // namespace lily::cpu
