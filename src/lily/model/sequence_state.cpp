#include "lily/model/sequence_state.h"

namespace lily {

SequenceState::SequenceState(const ModelConfig& config) : config_(&config) { reset(); }

void SequenceState::reset() {
  const ModelConfig& c = *config_;
  position_ = 0;
  layers_.assign(static_cast<size_t>(c.num_layers), LayerState{});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (c.layer_kinds[i] != LayerKind::LinearAttention) continue;
    layers_[i].conv.assign(static_cast<size_t>((c.linear_conv_kernel - 1) * c.gdn_conv_dim()), 0.f);
    layers_[i].recurrent.assign(
        static_cast<size_t>(c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim), 0.f);
  }
}

}  // namespace lily
