#include "lily/model/model.h"

#include <filesystem>

#include "lily/error.h"
#include "lily/model/binding.h"
#include "lily/model/gguf_binding.h"

namespace lily {

const char* layout_name(CheckpointLayout l) {
  switch (l) {
    case CheckpointLayout::HfRelease: return "hf-release (model.language_model.*, fused experts)";
    case CheckpointLayout::HfTextModel: return "hf-text (model.*, transformers text model)";
    case CheckpointLayout::Mlx: return "mlx (language_model.model.*, switch_mlp experts)";
    case CheckpointLayout::Gguf: return "gguf (llama.cpp qwen35moe, blk.N.*)";
  }
  return "?";
}

namespace {
// A loaded model's files, checked and bound: now their pages, in the background.
template <class Files>
void read_ahead(const Files& files) {
  std::vector<MappedFile*> mapped;
  for (const auto& f : files) mapped.push_back(&f->mapping());
  read_ahead_if_it_fits(mapped);
}
}  // namespace

std::unique_ptr<Model> Model::load(const std::string& dir) {
  auto m = std::make_unique<Model>();
  m->dir_ = dir;
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir, ec) && is_gguf_file(dir)) {
    m->gguf_ = GgufModel::open(dir);
    m->config_ = gguf_config(*m->gguf_);
    m->weights_ = bind_gguf_weights(*m->gguf_, m->config_, &m->report_);
    read_ahead(m->gguf_->files());
    return m;
  }
  m->config_ = ModelConfig::load(dir);
  m->archive_ = SafetensorsArchive::open_dir(dir);
  m->weights_ = bind_weights(*m->archive_, m->config_, &m->report_);
  read_ahead(m->archive_->files());
  return m;
}

const SafetensorsArchive& Model::archive() const {
  if (!archive_) throw Error(dir_ + " is a GGUF model: it has no safetensors (convert from a safetensors checkpoint)");
  return *archive_;
}

size_t Model::recurrent_state_bytes() const {
  const ModelConfig& c = config_;
  const size_t per_layer = static_cast<size_t>(c.gdn_conv_dim() * (c.linear_conv_kernel - 1) +
                                               c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim) *
                           sizeof(float);
  return per_layer * static_cast<size_t>(c.num_layers_of(LayerKind::LinearAttention));
}

size_t Model::decode_bytes_per_token(int64_t context) const {
  const ModelConfig& c = config_;
  const ModelWeights& w = weights_;
  size_t b = w.embed.row_bytes() + w.lm_head.bytes();
  for (const LayerWeights& L : w.layers) {
    if (L.kind == LayerKind::LinearAttention) {
      for (const Matrix* m : {&L.gdn.in_qkv, &L.gdn.in_z, &L.gdn.in_b, &L.gdn.in_a, &L.gdn.out}) b += m->bytes();
      // the recurrent state is read and written once
      b += 2 * static_cast<size_t>(c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim) * 4;
    } else {
      for (const Matrix* m : {&L.attn.q, &L.attn.k, &L.attn.v, &L.attn.o}) b += m->bytes();
      b += static_cast<size_t>(context) * 2 * static_cast<size_t>(c.num_kv_heads * c.head_dim) * 4;
    }
    const MoeWeights& m = L.moe;
    b += m.router.bytes() + m.shared_gate.bytes() + m.shared_up.bytes() + m.shared_down.bytes() + m.shared_expert_gate.bytes();
    b += static_cast<size_t>(c.experts_per_token) * (m.gate[0].bytes() + m.up[0].bytes() + m.down[0].bytes());
  }
  return b;
}

size_t Model::kv_bytes_per_token() const {
  const ModelConfig& c = config_;
  // the MTP head's layer keeps a cache of its own
  const size_t layers = static_cast<size_t>(c.num_layers_of(LayerKind::FullAttention)) + (weights_.mtp ? 1 : 0);
  return static_cast<size_t>(2 * c.num_kv_heads * c.head_dim) * sizeof(float) * layers;
}

}  // namespace lily
