// Binds a Hugging Face safetensors checkpoint (the official release layout or
// a transformers text-model save) onto the canonical weight set.
#pragma once

#include "lily/io/safetensors.h"
#include "lily/model/config.h"
#include "lily/model/model.h"
#include "lily/model/weights.h"

namespace lily {

// Validates and binds every tensor; throws lily::Error naming the first
// missing tensor, wrong shape or unsupported dtype.
ModelWeights bind_hf_weights(const SafetensorsArchive& archive, const ModelConfig& config, LoadReport* report);

}  // namespace lily
