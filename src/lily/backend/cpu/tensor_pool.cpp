#include "lily/backend/cpu/tensor_pool.h"

#include <algorithm>
#include <bit>

namespace lily::cpu {

namespace {
// Size classes an eighth of a power of two apart: a block serves any request
// of its class, wasting at most an eighth of it.
size_t size_class(size_t bytes) {
  const size_t step = std::max<size_t>(std::bit_floor(bytes) / 8, 64);
  return (bytes + step - 1) / step * step;
}
}  // namespace

struct TensorPool::Shelf {
  std::mutex mu;
  std::multimap<size_t, float*> free;  // class bytes -> block
  size_t kept = 0, keep;
  explicit Shelf(size_t k) : keep(k) {}
  ~Shelf() {
    for (auto& [bytes, p] : free) ::operator delete(p, std::align_val_t{64});
  }
  void give(float* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (kept + bytes <= keep) {
        free.emplace(bytes, p);
        kept += bytes;
        return;
      }
    }
    ::operator delete(p, std::align_val_t{64});
  }
};

TensorPool::TensorPool(size_t keep_bytes) : shelf_(std::make_shared<Shelf>(keep_bytes)) {}

std::shared_ptr<float> TensorPool::take(size_t floats) {
  const size_t want = std::max<size_t>(floats, 1) * sizeof(float);
  if (want < kMinPooled) return std::shared_ptr<float>(new float[floats](), std::default_delete<float[]>());
  const size_t bytes = size_class(want);
  float* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(shelf_->mu);
    auto it = shelf_->free.find(bytes);
    if (it != shelf_->free.end()) {
      p = it->second;
      shelf_->free.erase(it);
      shelf_->kept -= bytes;
    }
  }
  if (!p) p = static_cast<float*>(::operator new(bytes, std::align_val_t{64}));
  // not zeroed: every op writes all of its output, as on the GPU (whose
  // buffers are never cleared either)
  // the deleter keeps the shelf alive, so a tensor may outlive its backend
  return std::shared_ptr<float>(p, [shelf = shelf_, bytes](float* q) { shelf->give(q, bytes); });
}

size_t TensorPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(shelf_->mu);
  return shelf_->kept;
}

}  // namespace lily::cpu
