#include "lily/model/hf_binding.h"

#include <cmath>
#include <set>

#include "lily/error.h"

namespace lily {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  TensorView t;
  t.shape = s;
  return t.shape_string();
}

class Binder {
 public:
  Binder(const SafetensorsArchive& a, LoadReport* r) : archive_(a), report_(r) {}

  const TensorView& need(const std::string& name, const std::vector<int64_t>& shape) {
    const TensorView* t = archive_.find(name);
    if (t == nullptr)
      throw Error("missing tensor '" + name + "' (expected a BF16, F16 or F32 tensor of shape " + shape_str(shape) + ")");
    if (t->dtype != DType::BF16 && t->dtype != DType::F16 && t->dtype != DType::F32)
      throw Error("tensor '" + name + "' has dtype " + std::string(dtype_name(t->dtype)) +
                  "; expected BF16, F16 or F32");
    if (t->shape != shape)
      throw Error("tensor '" + name + "' has shape " + t->shape_string() + ", expected " + shape_str(shape));
    if (used_.insert(name).second) {
      report_->dtype_counts[std::string(dtype_name(t->dtype))]++;
      report_->parameters += t->numel();
      report_->weight_bytes += t->nbytes;
    }
    return *t;
  }
  bool has(const std::string& name) const { return archive_.find(name) != nullptr; }

  Matrix matrix(const std::string& name, int64_t rows, int64_t cols) {
    const TensorView& t = need(name, {rows, cols});
    return Matrix{t.dtype, t.data, rows, cols};
  }
  std::vector<float> vec(const std::string& name, const std::vector<int64_t>& shape) {
    const TensorView& t = need(name, shape);
    std::vector<float> out(static_cast<size_t>(t.numel()));
    convert_to_float(t.dtype, t.data, out.data(), out.size());
    return out;
  }
  // A (1+w) zero-centred norm weight, normalised to a plain multiplier.
  std::vector<float> centred_norm(const std::string& name, int64_t n) {
    std::vector<float> w = vec(name, {n});
    for (float& x : w) x += 1.0f;
    return w;
  }
  const std::set<std::string>& used() const { return used_; }

 private:
  const SafetensorsArchive& archive_;
  LoadReport* report_;
  std::set<std::string> used_;
};

// Slices expert `e` rows [row0, row0+rows) out of a fused [E, R, C] tensor.
Matrix expert_slice(const TensorView& t, int64_t e, int64_t row0, int64_t rows) {
  const int64_t R = t.shape[1], C = t.shape[2];
  const size_t es = dtype_size(t.dtype);
  const auto* base = static_cast<const uint8_t*>(t.data) + static_cast<size_t>((e * R + row0) * C) * es;
  return Matrix{t.dtype, base, rows, C};
}

void bind_gdn(Binder& b, const ModelConfig& c, const std::string& p, GatedDeltaNetWeights* g) {
  const int64_t H = c.hidden_size, conv_dim = c.gdn_conv_dim(), vdim = c.gdn_value_dim();
  const int64_t Hv = c.linear_num_value_heads, K = c.linear_conv_kernel;
  g->in_qkv = b.matrix(p + "in_proj_qkv.weight", conv_dim, H);
  g->in_z = b.matrix(p + "in_proj_z.weight", vdim, H);
  g->in_b = b.matrix(p + "in_proj_b.weight", Hv, H);
  g->in_a = b.matrix(p + "in_proj_a.weight", Hv, H);
  g->out = b.matrix(p + "out_proj.weight", H, vdim);
  g->conv = b.vec(p + "conv1d.weight", {conv_dim, 1, K});
  g->neg_exp_a = b.vec(p + "A_log", {Hv});
  for (float& x : g->neg_exp_a) x = -std::exp(x);
  g->dt_bias = b.vec(p + "dt_bias", {Hv});
  g->norm = b.vec(p + "norm.weight", {c.linear_value_head_dim});
}

void bind_attention(Binder& b, const ModelConfig& c, const std::string& p, AttentionWeights* a) {
  const int64_t H = c.hidden_size, hd = c.head_dim;
  a->q = b.matrix(p + "q_proj.weight", c.num_heads * 2 * hd, H);
  a->k = b.matrix(p + "k_proj.weight", c.num_kv_heads * hd, H);
  a->v = b.matrix(p + "v_proj.weight", c.num_kv_heads * hd, H);
  a->o = b.matrix(p + "o_proj.weight", H, c.num_heads * hd);
  a->q_norm = b.centred_norm(p + "q_norm.weight", hd);
  a->k_norm = b.centred_norm(p + "k_norm.weight", hd);
}

void bind_moe(Binder& b, const ModelConfig& c, const std::string& p, MoeWeights* m, LoadReport* report) {
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size, S = c.shared_expert_intermediate_size;
  m->router = b.matrix(p + "gate.weight", E, H);
  m->gate.resize(E);
  m->up.resize(E);
  m->down.resize(E);
  if (b.has(p + "experts.gate_up_proj")) {
    // Official release: gate rows [0, I) then up rows [I, 2I) of each expert.
    const TensorView& gu = b.need(p + "experts.gate_up_proj", {E, 2 * I, H});
    const TensorView& dn = b.need(p + "experts.down_proj", {E, H, I});
    for (int64_t e = 0; e < E; ++e) {
      m->gate[e] = expert_slice(gu, e, 0, I);
      m->up[e] = expert_slice(gu, e, I, I);
      m->down[e] = expert_slice(dn, e, 0, H);
    }
    report->fused_experts = true;
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      m->gate[e] = b.matrix(q + "gate_proj.weight", I, H);
      m->up[e] = b.matrix(q + "up_proj.weight", I, H);
      m->down[e] = b.matrix(q + "down_proj.weight", H, I);
    }
  }
  m->shared_gate = b.matrix(p + "shared_expert.gate_proj.weight", S, H);
  m->shared_up = b.matrix(p + "shared_expert.up_proj.weight", S, H);
  m->shared_down = b.matrix(p + "shared_expert.down_proj.weight", H, S);
  m->shared_expert_gate = b.matrix(p + "shared_expert_gate.weight", 1, H);
}

}  // namespace

ModelWeights bind_hf_weights(const SafetensorsArchive& archive, const ModelConfig& c, LoadReport* report) {
  std::string prefix;
  if (archive.find("model.language_model.embed_tokens.weight") != nullptr) {
    prefix = "model.language_model.";
    report->layout = CheckpointLayout::HfRelease;
  } else if (archive.find("model.embed_tokens.weight") != nullptr) {
    prefix = "model.";
    report->layout = CheckpointLayout::HfTextModel;
  } else {
    throw Error("missing tensor 'model.language_model.embed_tokens.weight' (or 'model.embed_tokens.weight'): "
                "not a Qwen3.5/3.6 MoE checkpoint layout Lily recognises");
  }
  Binder b(archive, report);
  ModelWeights w;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  w.embed = b.matrix(prefix + "embed_tokens.weight", V, H);
  w.final_norm = b.centred_norm(prefix + "norm.weight", H);
  if (archive.find("lm_head.weight") != nullptr || !c.tie_word_embeddings)
    w.lm_head = b.matrix("lm_head.weight", V, H);
  else
    w.lm_head = w.embed;
  w.layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    LayerWeights& L = w.layers[i];
    L.kind = c.layer_kinds[i];
    L.input_norm = b.centred_norm(p + "input_layernorm.weight", H);
    L.post_attention_norm = b.centred_norm(p + "post_attention_layernorm.weight", H);
    if (L.kind == LayerKind::LinearAttention)
      bind_gdn(b, c, p + "linear_attn.", &L.gdn);
    else
      bind_attention(b, c, p + "self_attn.", &L.attn);
    bind_moe(b, c, p + "mlp.", &L.moe, report);
  }
  for (const auto& [name, view] : archive.tensors()) {
    if (b.used().count(name)) continue;
    if (name.rfind("model.visual.", 0) == 0) report->skipped_groups["model.visual"]++;
    else if (name.rfind("mtp.", 0) == 0) report->skipped_groups["mtp"]++;
    else report->ignored.push_back(name);
  }
  return w;
}

}  // namespace lily
