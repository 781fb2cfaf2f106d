// Writes an MLX-layout checkpoint from a Hugging Face one: the names and
// conventions of mlx-vlm's conversion (language_model.model.*, switch_mlp
// experts, conv1d as [C, K, 1], the +1 of the zero-centred norms baked in)
// and mlx's affine quantization, with mlx-lm's 8-bit router and
// shared-expert gate. MLX tools read the result as they read their own.
#pragma once

#include <string>

namespace lily::quant {

struct ExportOptions {
  int bits = 4;
  int group_size = 64;
};

// Reads `src` (validated as a model first), writes `dst`; throws lily::Error.
void export_mlx(const std::string& src, const std::string& dst, const ExportOptions& opt);

}  // namespace lily::quant
