// The Qwen3.5/3.6 MoE forward pass, written once over the CPU op set:
// embeddings, 40 (or, for test models, any number of) decoder layers that mix
// Gated DeltaNet and gated full attention, each followed by the sparse MoE
// block, then the final norm and the untied head.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lily/model/model.h"
#include "lily/model/sequence_state.h"

namespace lily {

enum class LogitsFor { AllPositions, LastPosition };

class Qwen35MoeForward {
 public:
  explicit Qwen35MoeForward(const Model& model);

  // Consumes `tokens` at the state's current position and advances it.
  // Returns logits [rows, vocab] where rows is tokens.size() or 1.
  // Throws lily::Error for a token outside the vocabulary, before touching the state.
  std::vector<float> forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which);

  // Prompts are processed by the chunked delta rule above one token; this is
  // its chunk length. Chunks are aligned to absolute positions, so resuming
  // from a state saved at a multiple of it reproduces a fresh prefill exactly.
  static constexpr int64_t kDeltaChunk = 64;

 private:
  void gated_delta_net(const LayerWeights& L, LayerState& s, int64_t p0, const float* x, int64_t T, float* out);
  void attention(const LayerWeights& L, LayerState& s, int64_t p0, const float* x, int64_t T, float* out);

  const Model& model_;
  const ModelConfig& cfg_;
  std::vector<float> inv_freq_;
};

}  // namespace lily
