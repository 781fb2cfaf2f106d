// A GGUF model of llama.cpp's `qwen35moe` architecture, as Lily's config,
// weights and tokenizer. The metadata becomes the same config a config.json
// gives (and passes the same checks); the tensors are bound where they lie,
// in their block formats; the conventions of llama.cpp's converter are taken
// as they are: norms with the 1 baked in, -exp(A_log) stored, the conv
// squeezed, and the value heads of the Gated DeltaNet in "tiled" order (value
// head v reads key head v % key_heads), which the forward pass follows.
#pragma once

#include <string>

#include "lily/io/gguf.h"
#include "lily/model/config.h"
#include "lily/model/model.h"
#include "lily/model/weights.h"

namespace lily {

// Throws lily::Error naming the metadata key at fault, or the architecture
// when it is not qwen35moe.
ModelConfig gguf_config(const GgufModel& g);

// Validates and binds every tensor; errors name the tensor.
ModelWeights bind_gguf_weights(const GgufModel& g, const ModelConfig& c, LoadReport* report);

// The tokenizer the metadata describes (tokenizer.ggml.*), written as the
// tokenizer.json it corresponds to.
std::string gguf_tokenizer_json(const GgufModel& g);

// tokenizer.chat_template, or "" when the file has none.
std::string gguf_chat_template(const GgufModel& g);

}  // namespace lily
