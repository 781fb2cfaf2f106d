// The text-model configuration of a qwen3_5_moe checkpoint, read from its
// config.json (top level for `qwen3_5_moe_text`, `text_config` for the
// official `qwen3_5_moe` release) and checked for consistency before use.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lily {

enum class LayerKind { LinearAttention, FullAttention };

// The `quantization` block of an MLX config.json: a default and per-module
// overrides (the module path as in the checkpoint, e.g.
// "language_model.model.layers.0.mlp.gate").
struct QuantizationConfig {
  int bits = 0;  // 0: the checkpoint is not quantized
  int group_size = 0;
  struct Override {
    int bits, group_size;
  };
  std::map<std::string, Override> overrides;

  // bits and group size for a module (its path without ".weight").
  Override for_module(const std::string& path) const;
};

struct ModelConfig {
  std::string model_type;  // as found at the top of config.json
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  std::vector<LayerKind> layer_kinds;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;

  // gated full attention
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // head_dim * partial_rotary_factor
  double rope_theta = 10000.0;

  // Gated DeltaNet
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel = 0;
  // Value head v reads key head v % key_heads ("tiled", as llama.cpp's GGUF
  // converter reorders them) instead of v / (value_heads / key_heads).
  bool gdn_tiled_value_heads = false;

  // mixture of experts
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;

  QuantizationConfig quantization;
  std::vector<int64_t> eos_token_ids;
  int64_t bos_token_id = -1;

  // Derived sizes.
  int64_t gdn_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t gdn_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t gdn_conv_dim() const { return 2 * gdn_key_dim() + gdn_value_dim(); }
  int64_t num_layers_of(LayerKind k) const;

  // Reads and validates `dir/config.json`; throws lily::Error naming the field at fault.
  static ModelConfig load(const std::string& dir);
  // Same, from the parsed text of a config.json (`source` names it in errors).
  static ModelConfig parse(const std::string& json_text, const std::string& source);
  // A config.json is a few KB; this bounds what is read.
  static constexpr size_t kMaxConfigBytes = size_t(4) << 20;
  // The model has 40; a config (or GGUF metadata) that claims more than this
  // is refused before anything is sized by it.
  static constexpr int64_t kMaxLayers = 1024;
};

}  // namespace lily
