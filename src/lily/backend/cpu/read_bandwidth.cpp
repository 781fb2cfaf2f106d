#include "lily/backend/cpu/read_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "lily/backend/cpu/thread_pool.h"
#include "lily/io/huge_page_buffer.h"

namespace lily::cpu {

using clock_type = std::chrono::steady_clock;

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int repeats) {
  const size_t n = bytes / sizeof(uint64_t);
  // On huge pages where the kernel gives them: the figure is then what memory
  // delivers to a stream that address translation does not slow, the
  // roofline's most generous reading, however the weights themselves are held.
  HugePageBuffer region(bytes, "to measure bandwidth");
  auto* buf = reinterpret_cast<uint64_t*>(region.data());
  pool.parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  });
  double best = 0;
  volatile uint64_t sink = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    std::vector<uint64_t> partial(static_cast<size_t>(pool.size()) * 8, 0);
    const auto t0 = clock_type::now();
    pool.parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t i = b;
      for (; i + 4 <= e; i += 4) a0 += buf[i], a1 += buf[i + 1], a2 += buf[i + 2], a3 += buf[i + 3];
      for (; i < e; ++i) a0 += buf[i];
      sink = sink + (a0 ^ a1 ^ a2 ^ a3);
    });
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / s);
  }
  return best;
}

}  // namespace lily::cpu
