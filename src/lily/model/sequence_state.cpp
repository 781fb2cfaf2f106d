#include "lily/model/sequence_state.h"

namespace lily {

StateLayout state_layout(const ModelConfig& c) {
  StateLayout l;
  for (int64_t i = 0; i < c.num_layers; ++i) l.delta_layer.push_back(c.layer_kinds[i] == LayerKind::LinearAttention);
  l.conv_rows = c.linear_conv_kernel - 1;
  l.conv_dim = c.gdn_conv_dim();
  l.value_heads = c.linear_num_value_heads;
  l.key_dim = c.linear_key_head_dim;
  l.value_dim = c.linear_value_head_dim;
  l.kv_heads = c.num_kv_heads;
  l.head_dim = c.head_dim;
  return l;
}

}  // namespace lily
