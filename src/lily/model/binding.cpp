#include "lily/model/binding.h"

#include <cmath>
#include <set>

#include "lily/error.h"
#include "lily/quant/affine.h"

namespace lily {

namespace {

// A plain matrix viewing `rows` x `cols` elements of `dtype` at `data`.
Matrix plain(DType dtype, const void* data, int64_t rows, int64_t cols) {
  Matrix m;
  m.dtype = dtype;
  m.data = data;
  m.rows = rows;
  m.cols = cols;
  return m;
}

bool is_float(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

// How one layout names and stores the tensors.
struct Scheme {
  CheckpointLayout layout;
  std::string prefix;   // before "embed_tokens", "layers.N.", "norm"
  std::string lm_head;  // full name of the head's weight
  bool centred_norms;   // (1+w) norms stored around 0 (Hugging Face) or with the 1 baked in (MLX)
  bool mlx;             // conv1d as [C, K, 1], experts as switch_mlp, matrices may be quantized
};

class Binder {
 public:
  Binder(const SafetensorsArchive& a, const ModelConfig& c, LoadReport* r) : archive_(a), config_(c), report_(r) {}

  const TensorView& need(const std::string& name, const std::vector<int64_t>& shape, bool float_type = true) {
    const TensorView* t = archive_.find(name);
    if (t == nullptr)
      throw Error("missing tensor '" + name + "' (expected shape " + shape_string(shape) + ")");
    if (float_type && !is_float(t->dtype))
      throw Error("tensor '" + name + "' has dtype " + std::string(dtype_name(t->dtype)) + "; expected BF16, F16 or F32" +
                  (t->dtype == DType::U32 ? " (a packed weight needs its .scales and .biases)" : ""));
    if (t->shape != shape)
      throw Error("tensor '" + name + "' has shape " + t->shape_string() + ", expected " + shape_string(shape));
    if (used_.insert(name).second) {
      report_->dtype_counts[std::string(dtype_name(t->dtype))]++;
      report_->dtype_bytes[std::string(dtype_name(t->dtype))] += t->nbytes;
      report_->weight_bytes += t->nbytes;
    }
    return *t;
  }
  bool has(const std::string& name) const { return archive_.find(name) != nullptr; }

  // A weight `base + ".weight"` of logical shape [lead..., rows, cols]; quantized when `base.scales` exists.
  // Returns one Matrix per leading index (one for 2-D weights).
  std::vector<Matrix> matrices(const std::string& base, std::vector<int64_t> lead, int64_t rows, int64_t cols) {
    int64_t count = 1;
    for (int64_t d : lead) count *= d;
    std::vector<int64_t> shape = lead;
    shape.push_back(rows);
    shape.push_back(cols);
    std::vector<Matrix> out(static_cast<size_t>(count));
    report_->parameters += count * rows * cols;
    if (!has(base + ".scales")) {
      const TensorView& t = need(base + ".weight", shape);
      for (int64_t i = 0; i < count; ++i)
        out[i] = plain(t.dtype, static_cast<const uint8_t*>(t.data) + static_cast<size_t>(i * rows * cols) * dtype_size(t.dtype), rows, cols);
      return out;
    }
    const auto q = config_.quantization.bits > 0 ? config_.quantization.for_module(base)
                                                 : QuantizationConfig::Override{0, 0};
    if (q.bits == 0)
      throw Error("tensor '" + base + ".scales' is present but config.json has no quantization block");
    if (cols % q.group_size != 0)
      throw Error("tensor '" + base + ".weight': " + std::to_string(cols) + " columns are not a multiple of group size " +
                  std::to_string(q.group_size));
    std::vector<int64_t> packed = lead, groups = lead;
    packed.push_back(rows);
    packed.push_back(cols * q.bits / 32);
    groups.push_back(rows);
    groups.push_back(cols / q.group_size);
    const TensorView* w = archive_.find(base + ".weight");
    if (w != nullptr && w->dtype != DType::U32)
      throw Error("tensor '" + base + ".weight' has dtype " + std::string(dtype_name(w->dtype)) +
                  "; a quantized weight is packed in U32");
    if (w != nullptr && w->shape != packed)
      throw Error("tensor '" + base + ".weight' has shape " + w->shape_string() + ", expected " + shape_string(packed) +
                  " for " + std::to_string(q.bits) + "-bit packing of " + std::to_string(cols) + " columns");
    const TensorView& wt = need(base + ".weight", packed, false);
    const TensorView& st = need(base + ".scales", groups);
    const TensorView& bt = need(base + ".biases", groups);
    if (st.dtype != bt.dtype)
      throw Error("tensors '" + base + ".scales' and '.biases' have different dtypes");
    const size_t wrow = quant::packed_row_bytes(cols, q.bits), srow = static_cast<size_t>(cols / q.group_size) * dtype_size(st.dtype);
    for (int64_t i = 0; i < count; ++i) {
      Matrix m;
      m.data = static_cast<const uint8_t*>(wt.data) + static_cast<size_t>(i * rows) * wrow;
      m.rows = rows;
      m.cols = cols;
      m.bits = q.bits;
      m.group_size = q.group_size;
      m.scale_dtype = st.dtype;
      m.scales = static_cast<const uint8_t*>(st.data) + static_cast<size_t>(i * rows) * srow;
      m.biases = static_cast<const uint8_t*>(bt.data) + static_cast<size_t>(i * rows) * srow;
      out[i] = m;
    }
    report_->quantized = true;
    return out;
  }
  Matrix matrix(const std::string& base, int64_t rows, int64_t cols) { return matrices(base, {}, rows, cols)[0]; }

  std::vector<float> vec(const std::string& name, const std::vector<int64_t>& shape) {
    const TensorView& t = need(name, shape);
    std::vector<float> out(static_cast<size_t>(t.numel()));
    convert_to_float(t.dtype, t.data, out.data(), out.size());
    report_->parameters += t.numel();
    return out;
  }
  const std::set<std::string>& used() const { return used_; }
  void add_used(const std::set<std::string>& names) { used_.insert(names.begin(), names.end()); }

 private:
  const SafetensorsArchive& archive_;
  const ModelConfig& config_;
  LoadReport* report_;
  std::set<std::string> used_;
};

// A norm weight as a plain multiplier: Hugging Face stores (1+w) norms around 0.
std::vector<float> norm(Binder& b, const Scheme& s, const std::string& name, int64_t n) {
  std::vector<float> w = b.vec(name, {n});
  if (s.centred_norms)
    for (float& x : w) x += 1.0f;
  return w;
}

void bind_gdn(Binder& b, const Scheme& s, const ModelConfig& c, const std::string& p, GatedDeltaNetWeights* g) {
  const int64_t H = c.hidden_size, conv_dim = c.gdn_conv_dim(), vdim = c.gdn_value_dim();
  const int64_t Hv = c.linear_num_value_heads, K = c.linear_conv_kernel;
  g->in_qkv = b.matrix(p + "in_proj_qkv", conv_dim, H);
  g->in_z = b.matrix(p + "in_proj_z", vdim, H);
  g->in_b = b.matrix(p + "in_proj_b", Hv, H);
  g->in_a = b.matrix(p + "in_proj_a", Hv, H);
  g->out = b.matrix(p + "out_proj", H, vdim);
  // [C, 1, K] in Hugging Face, [C, K, 1] in MLX: the same bytes either way
  g->conv = b.vec(p + "conv1d.weight", s.mlx ? std::vector<int64_t>{conv_dim, K, 1} : std::vector<int64_t>{conv_dim, 1, K});
  std::vector<float> neg_exp_a = b.vec(p + "A_log", {Hv});
  for (float& x : neg_exp_a) x = -std::exp(x);
  g->neg_exp_a = std::move(neg_exp_a);
  g->dt_bias = b.vec(p + "dt_bias", {Hv});
  g->norm = b.vec(p + "norm.weight", {c.linear_value_head_dim});
}

void bind_attention(Binder& b, const Scheme& s, const ModelConfig& c, const std::string& p, AttentionWeights* a) {
  const int64_t H = c.hidden_size, hd = c.head_dim;
  a->q = b.matrix(p + "q_proj", c.num_heads * 2 * hd, H);
  a->k = b.matrix(p + "k_proj", c.num_kv_heads * hd, H);
  a->v = b.matrix(p + "v_proj", c.num_kv_heads * hd, H);
  a->o = b.matrix(p + "o_proj", H, c.num_heads * hd);
  a->q_norm = norm(b, s, p + "q_norm.weight", hd);
  a->k_norm = norm(b, s, p + "k_norm.weight", hd);
}

void bind_moe(Binder& b, const Scheme& s, const ModelConfig& c, const std::string& p, MoeWeights* m, LoadReport* report) {
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size, S = c.shared_expert_intermediate_size;
  m->router = b.matrix(p + "gate", E, H);
  if (s.mlx) {
    m->gate = b.matrices(p + "switch_mlp.gate_proj", {E}, I, H);
    m->up = b.matrices(p + "switch_mlp.up_proj", {E}, I, H);
    m->down = b.matrices(p + "switch_mlp.down_proj", {E}, H, I);
  } else if (b.has(p + "experts.gate_up_proj")) {
    // Official release: per expert, gate rows [0, I) then up rows [I, 2I); no ".weight" suffix.
    const TensorView& gu = b.need(p + "experts.gate_up_proj", {E, 2 * I, H});
    const TensorView& dn = b.need(p + "experts.down_proj", {E, H, I});
    const size_t es = dtype_size(gu.dtype), ds = dtype_size(dn.dtype);
    for (int64_t e = 0; e < E; ++e) {
      const auto* base = static_cast<const uint8_t*>(gu.data) + static_cast<size_t>(e * 2 * I * H) * es;
      m->gate.push_back(plain(gu.dtype, base, I, H));
      m->up.push_back(plain(gu.dtype, base + static_cast<size_t>(I * H) * es, I, H));
      m->down.push_back(plain(dn.dtype, static_cast<const uint8_t*>(dn.data) + static_cast<size_t>(e * H * I) * ds, H, I));
    }
    report->parameters += E * 3 * I * H;
    report->fused_experts = true;
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      m->gate.push_back(b.matrix(q + "gate_proj", I, H));
      m->up.push_back(b.matrix(q + "up_proj", I, H));
      m->down.push_back(b.matrix(q + "down_proj", H, I));
    }
  }
  m->shared_gate = b.matrix(p + "shared_expert.gate_proj", S, H);
  m->shared_up = b.matrix(p + "shared_expert.up_proj", S, H);
  m->shared_down = b.matrix(p + "shared_expert.down_proj", H, S);
  m->shared_expert_gate = b.matrix(p + "shared_expert_gate", 1, H);
}

// The official release's MTP head: `mtp.fc`, its three norms and one
// full-attention decoder layer under `mtp.layers.0.`.
MtpWeights bind_mtp(Binder& b, const Scheme& s, const ModelConfig& c, LoadReport* report) {
  const int64_t H = c.hidden_size;
  MtpWeights m;
  m.fc = b.matrix("mtp.fc", H, 2 * H);
  m.embed_norm = norm(b, s, "mtp.pre_fc_norm_embedding.weight", H);
  m.hidden_norm = norm(b, s, "mtp.pre_fc_norm_hidden.weight", H);
  m.final_norm = norm(b, s, "mtp.norm.weight", H);
  const std::string p = "mtp.layers.0.";
  m.layer.kind = LayerKind::FullAttention;
  m.layer.input_norm = norm(b, s, p + "input_layernorm.weight", H);
  m.layer.post_attention_norm = norm(b, s, p + "post_attention_layernorm.weight", H);
  bind_attention(b, s, c, p + "self_attn.", &m.layer.attn);
  bind_moe(b, s, c, p + "mlp.", &m.layer.moe, report);
  return m;
}

Scheme detect(const SafetensorsArchive& archive) {
  if (archive.find("language_model.model.embed_tokens.weight") != nullptr)
    return {CheckpointLayout::Mlx, "language_model.model.", "language_model.lm_head.weight", false, true};
  if (archive.find("model.language_model.embed_tokens.weight") != nullptr)
    return {CheckpointLayout::HfRelease, "model.language_model.", "lm_head.weight", true, false};
  if (archive.find("model.embed_tokens.weight") != nullptr) {
    for (const auto& [name, t] : archive.tensors())
      if (name.find(".switch_mlp.") != std::string::npos)  // mlx-lm's text-only conversion
        return {CheckpointLayout::Mlx, "model.", "lm_head.weight", false, true};
    return {CheckpointLayout::HfTextModel, "model.", "lm_head.weight", true, false};
  }
  throw Error("missing tensor 'model.language_model.embed_tokens.weight' (or 'model.embed_tokens.weight', "
              "'language_model.model.embed_tokens.weight'): not a Qwen3.5/3.6 MoE checkpoint layout Lily recognises");
}

}  // namespace

ModelWeights bind_weights(const SafetensorsArchive& archive, const ModelConfig& c, LoadReport* report) {
  const Scheme s = detect(archive);
  report->layout = s.layout;
  Binder b(archive, c, report);
  ModelWeights w;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  w.embed = b.matrix(s.prefix + "embed_tokens", V, H);
  w.final_norm = norm(b, s, s.prefix + "norm.weight", H);
  const std::string head = s.lm_head.substr(0, s.lm_head.size() - std::string(".weight").size());
  if (archive.find(s.lm_head) != nullptr || !c.tie_word_embeddings)
    w.lm_head = b.matrix(head, V, H);
  else
    w.lm_head = w.embed;
  w.layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = s.prefix + "layers." + std::to_string(i) + ".";
    LayerWeights& L = w.layers[i];
    L.kind = c.layer_kinds[i];
    L.input_norm = norm(b, s, p + "input_layernorm.weight", H);
    L.post_attention_norm = norm(b, s, p + "post_attention_layernorm.weight", H);
    if (L.kind == LayerKind::LinearAttention)
      bind_gdn(b, s, c, p + "linear_attn.", &L.gdn);
    else
      bind_attention(b, s, c, p + "self_attn.", &L.attn);
    bind_moe(b, s, c, p + "mlp.", &L.moe, report);
  }
  if (archive.find("mtp.fc.weight") != nullptr) {
    // A head that does not bind (a tensor missing or of the wrong shape)
    // leaves the text model usable, without speculative decoding: it is
    // bound against a copy of the report, kept only when the whole head is.
    LoadReport trial = *report;
    Binder hb(archive, c, &trial);
    try {
      w.mtp = bind_mtp(hb, s, c, &trial);
      *report = std::move(trial);
      b.add_used(hb.used());
    } catch (const Error& e) {
      report->mtp_note = e.what();
    }
  }
  for (const auto& [name, view] : archive.tensors()) {
    if (b.used().count(name)) continue;
    if (name.rfind("model.visual.", 0) == 0) report->skipped_groups["model.visual"]++;
    else if (name.rfind("vision_tower.", 0) == 0) report->skipped_groups["vision_tower"]++;
    else if (name.rfind("mtp.", 0) == 0) report->skipped_groups["mtp"]++;
    else report->ignored.push_back(name);
  }
  return w;
}

}  // namespace lily
