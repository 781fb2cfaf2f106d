// Binds a checkpoint's tensors onto the canonical weight set, whichever
// layout it comes in: the official Hugging Face release, a transformers
// text-model save, or an MLX conversion (quantized or not). Each layout's
// names and conventions are normalised here, once.
#pragma once

#include "lily/io/safetensors.h"
#include "lily/model/config.h"
#include "lily/model/model.h"
#include "lily/model/weights.h"

namespace lily {

// Validates and binds every tensor; throws lily::Error naming the first
// missing tensor, wrong shape, unsupported dtype or bad quantized packing.
ModelWeights bind_weights(const SafetensorsArchive& archive, const ModelConfig& config, LoadReport* report);

}  // namespace lily
