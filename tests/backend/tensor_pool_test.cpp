// The CPU backend's activation pool: large blocks given back are reused, at
// most the kept bytes are held, small ones are not pooled, and a block may
// outlive its pool.
#include "lily/backend/cpu/tensor_pool.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace lily::cpu {
namespace {

constexpr size_t kBig = TensorPool::kMinPooled / sizeof(float) * 4;  // floats in a pooled block

TEST(TensorPool, GivenBackBlocksAreReused) {
  TensorPool pool(size_t{64} << 20);
  float* first = nullptr;
  {
    std::shared_ptr<float> a = pool.take(kBig);
    first = a.get();
    std::fill(a.get(), a.get() + kBig, 3.f);
  }
  EXPECT_GT(pool.kept_bytes(), 0u);
  std::shared_ptr<float> b = pool.take(kBig - 100);  // the same size class
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(pool.kept_bytes(), 0u);
  EXPECT_EQ(b.get()[kBig - 101], 3.f);  // as it was given back
}

TEST(TensorPool, KeepsNoMoreThanItsLimitAndLeavesSmallBlocksAlone) {
  TensorPool pool(kBig * sizeof(float) * 3 / 2);  // room for one big block, not two
  {
    std::shared_ptr<float> a = pool.take(kBig), b = pool.take(kBig);
  }
  EXPECT_LE(pool.kept_bytes(), kBig * sizeof(float) * 3 / 2);
  EXPECT_GT(pool.kept_bytes(), 0u);
  TensorPool empty(size_t{64} << 20);
  { std::shared_ptr<float> small = empty.take(16); }
  EXPECT_EQ(empty.kept_bytes(), 0u);
}

TEST(TensorPool, ABlockMayOutliveItsPool) {
  std::shared_ptr<float> a;
  {
    TensorPool pool(size_t{64} << 20);
    a = pool.take(kBig);
  }
  a.get()[kBig - 1] = 1.f;
  a.reset();  // goes back to the shelf the block still holds, then with it
}

}  // namespace
}  // namespace lily::cpu
