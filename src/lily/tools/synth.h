// Writes random-weight checkpoints with the real Qwen3.6-35B-A3B shapes and
// the real file layouts (the official bf16 release, or an MLX 4/6/8-bit
// conversion), for benchmarks without downloads. Values are cheap
// pseudo-random numbers at realistic scales, streamed to disk so even the
// full 40-layer model never sits in memory.
#pragma once

#include <cstdint>
#include <string>

namespace lily {

struct SynthOptions {
  int layers = 4;       // the first N layers of the real layer pattern
  std::string format;   // bf16 | mlx4 | mlx6 | mlx8
  int64_t vocab = 248320;
  uint64_t seed = 1;
  bool mtp = false;     // the release's MTP head too (bf16 only)
};

// Throws lily::Error for a bad format or an unwritable directory.
void write_synth_checkpoint(const std::string& dir, const SynthOptions& opt);

}  // namespace lily
