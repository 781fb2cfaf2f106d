// Everything one sequence carries between forward calls: the KV cache of the
// full-attention layers and the conv + recurrent state of the GDN layers.
// Feeding a prompt in one call, in chunks or token by token through the same
// state gives the same logits.
#pragma once

#include <cstdint>
#include <vector>

#include "lily/model/config.h"

namespace lily {

struct LayerState {
  // full attention: [positions, kv_heads, head_dim]
  std::vector<float> keys, values;
  // Gated DeltaNet: [kernel-1, conv_dim] pre-conv rows, oldest first; [v_heads, dk, dv]
  std::vector<float> conv, recurrent;
};

class SequenceState {
 public:
  explicit SequenceState(const ModelConfig& config);

  int64_t position() const { return position_; }  // tokens consumed so far
  void advance(int64_t n) { position_ += n; }
  // Returns to the empty sequence.
  void reset();

  LayerState& layer(int64_t i) { return layers_[static_cast<size_t>(i)]; }
  const LayerState& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }

 private:
  const ModelConfig* config_;
  int64_t position_ = 0;
  std::vector<LayerState> layers_;
};

}  // namespace lily
