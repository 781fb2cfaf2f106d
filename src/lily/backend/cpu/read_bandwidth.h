// The memory's sustained read bandwidth, the roofline of a decode step on the CPU.
#pragma once

#include <cstddef>

namespace lily::cpu {

class ThreadPool;

// Bytes/s read by every thread of `pool` streaming over `bytes` (best of `repeats`).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int repeats);

}  // namespace lily::cpu
