// A loaded model: its configuration, the mapped checkpoint and the canonical
// weights bound to it, plus what the loader found (layout, skipped tensors).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lily/io/gguf.h"
#include "lily/io/safetensors.h"
#include "lily/model/config.h"
#include "lily/model/weights.h"

namespace lily {

// The checkpoint layouts the loader recognises.
enum class CheckpointLayout {
  HfRelease,    // official release: model.language_model.*, fused 3-D experts, visual + mtp present
  HfTextModel,  // transformers save_pretrained of the text model: model.*, per-expert tensors
  Mlx,          // mlx-lm / mlx-vlm conversion: language_model.model.*, switch_mlp experts, maybe quantized
  Gguf,         // llama.cpp's qwen35moe GGUF: blk.N.*, ggml block formats, tiled value heads
};
const char* layout_name(CheckpointLayout l);

struct LoadReport {
  CheckpointLayout layout = CheckpointLayout::HfTextModel;
  bool fused_experts = false;
  bool quantized = false;
  std::map<std::string, int> skipped_groups;  // "model.visual" -> tensor count, "mtp" -> ...
  std::vector<std::string> ignored;           // other tensors the text model does not use
  std::string mtp_note;                       // why an MTP head that is there is not used
  std::map<std::string, int64_t> dtype_counts;  // "BF16" -> number of tensors
  std::map<std::string, size_t> dtype_bytes;    // "BF16" -> bytes of those tensors
  int64_t parameters = 0;                       // elements of the tensors bound
  size_t weight_bytes = 0;                      // bytes of the tensors bound
};

class Model {
 public:
  // Loads `dir`: reads config.json, maps the safetensors, checks every tensor's
  // presence, dtype and shape and binds the canonical weights. A GGUF file
  // (one file, a part of a split model, or an Ollama blob) is loaded from its
  // metadata and tensors instead. Throws lily::Error.
  static std::unique_ptr<Model> load(const std::string& dir);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const LoadReport& report() const { return report_; }
  const std::string& dir() const { return dir_; }
  // The safetensors of a directory model; throws lily::Error for a GGUF model.
  const SafetensorsArchive& archive() const;
  // The GGUF file(s) of a GGUF model, else null.
  const GgufModel* gguf() const { return gguf_.get(); }

  // Bytes of per-sequence state: the GDN conv + recurrent state (fixed) and the KV cache per token.
  size_t recurrent_state_bytes() const;
  size_t kv_bytes_per_token() const;
  // Bytes one decode step must read at `context` tokens: the weights it
  // touches (the routed experts on average) plus the caches and GDN state.
  size_t decode_bytes_per_token(int64_t context) const;

 private:
  std::string dir_;
  ModelConfig config_;
  std::unique_ptr<SafetensorsArchive> archive_;
  std::unique_ptr<GgufModel> gguf_;
  ModelWeights weights_;
  LoadReport report_;
};

}  // namespace lily
