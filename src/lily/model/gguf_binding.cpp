#include "lily/model/gguf_binding.h"

#include <nlohmann/json.hpp>
#include <set>

#include "lily/error.h"
#include "lily/io/safetensors.h"

namespace lily {

namespace {

using ordered = nlohmann::ordered_json;
// A vocabulary of 250k entries: an ordered_json object would look each key up linearly.
using unordered_json = nlohmann::json;

const std::string kArch = "qwen35moe";

const GgufValue& need(const GgufModel& g, const std::string& key) {
  const GgufValue* v = g.find(key);
  if (!v) throw Error(g.first().path() + ": GGUF metadata '" + key + "' is missing");
  return *v;
}

int64_t int_key(const GgufModel& g, const std::string& key) { return need(g, key).as_int(key); }

// The pre-tokenizer regex of each tokenizer.ggml.pre value Lily knows, as the
// model's own tokenizer.json writes it.
std::string pre_tokenizer_regex(const std::string& pre) {
  if (pre == "qwen2")
    return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (pre == "qwen35")
    return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  throw Error("tokenizer.ggml.pre '" + pre + "' is not a pre-tokenizer Lily knows (qwen2, qwen35)");
}

class GgufBinder {
 public:
  GgufBinder(const GgufModel& g, LoadReport* r) : g_(g), report_(r) {}

  // The tensor, its shape checked ([cols, rows, ...] as ggml lists it).
  const GgufTensor& need(const std::string& name, const std::vector<int64_t>& shape) {
    const GgufTensor* t = g_.tensor(name);
    if (!t) throw Error(g_.first().path() + ": missing tensor '" + name + "'");
    if (t->shape != shape)
      throw Error(g_.first().path() + ": tensor '" + name + "' has shape " + shape_string(t->shape) + ", expected " +
                  shape_string(shape));
    if (used_.insert(name).second) {
      report_->dtype_counts[ggml_type_name(t->type)]++;
      report_->dtype_bytes[ggml_type_name(t->type)] += t->nbytes;
      report_->weight_bytes += t->nbytes;
      report_->parameters += t->numel();
    }
    return *t;
  }

  // Matrices [rows, cols] (one per expert when `count` > 0) viewing the tensor in place.
  std::vector<Matrix> matrices(const std::string& name, int64_t rows, int64_t cols, int64_t count = 0) {
    std::vector<int64_t> shape{cols, rows};
    if (count > 0) shape.push_back(count);
    const GgufTensor& t = need(name, shape);
    std::vector<Matrix> out;
    for (int64_t i = 0; i < std::max<int64_t>(count, 1); ++i) out.push_back(view(t, i, rows, cols));
    return out;
  }
  // A [rows, cols] view of the i-th such matrix in `t`.
  Matrix view(const GgufTensor& t, int64_t i, int64_t rows, int64_t cols) {
    int64_t elems = 0, bytes = 0;
    ggml_block_layout(t.type, &elems, &bytes);
    Matrix m;
    m.rows = rows;
    m.cols = cols;
    m.data = t.data + static_cast<size_t>(i * rows) * static_cast<size_t>(cols / elems * bytes);
    switch (t.type) {
      case GgmlType::F32: m.dtype = DType::F32; break;
      case GgmlType::F16: m.dtype = DType::F16; break;
      case GgmlType::BF16: m.dtype = DType::BF16; break;
      default:
        m.dtype = DType::U8;
        m.ggml_type = static_cast<int>(t.type);
        report_->quantized = true;
    }
    return m;
  }
  Matrix matrix(const std::string& name, int64_t rows, int64_t cols) { return matrices(name, rows, cols)[0]; }

  std::vector<float> vec(const std::string& name, const std::vector<int64_t>& shape) {
    const GgufTensor& t = need(name, shape);
    if (t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16)
      throw Error(g_.first().path() + ": tensor '" + name + "' is " + ggml_type_name(t.type) + "; expected F32, F16 or BF16");
    std::vector<float> out(static_cast<size_t>(t.numel()));
    const DType d = t.type == GgmlType::F32 ? DType::F32 : t.type == GgmlType::F16 ? DType::F16 : DType::BF16;
    convert_to_float(d, t.data, out.data(), out.size());
    return out;
  }
  bool has(const std::string& name) const { return g_.tensor(name) != nullptr; }
  const std::set<std::string>& used() const { return used_; }

 private:
  const GgufModel& g_;
  LoadReport* report_;
  std::set<std::string> used_;
};

// Blocks at the end of an MTP GGUF that hold the multi-token-prediction head.
int64_t nextn_layers(const GgufModel& g) {
  const GgufValue* v = g.find(std::string(kArch) + ".nextn_predict_layers");
  if (!v) return 0;
  const int64_t n = v->as_int("nextn_predict_layers");
  if (n < 0 || n > 1)
    throw Error(g.first().path() + ": " + kArch + ".nextn_predict_layers is " + std::to_string(n) +
                "; this model has at most one MTP block");
  return n;
}

}  // namespace

ModelConfig gguf_config(const GgufModel& g) {
  const std::string& arch = need(g, "general.architecture").as_string("general.architecture");
  if (arch != kArch)
    throw Error(g.first().path() + ": the GGUF's architecture is '" + arch + "'; Lily runs '" + kArch +
                "' (Qwen3.5/3.6 MoE)");
  auto key = [&](const std::string& k) { return kArch + "." + k; };
  auto num = [&](const std::string& k) { return int_key(g, key(k)); };
  const GgufTensor* embd = g.tensor("token_embd.weight");
  if (!embd || embd->shape.size() != 2) throw Error(g.first().path() + ": missing tensor 'token_embd.weight'");
  const int64_t value_heads = num("ssm.time_step_rank");
  ordered c = {
      {"model_type", "qwen3_5_moe_text"},
      {"vocab_size", embd->shape[1]},
      {"hidden_size", num("embedding_length")},
      // an MTP GGUF counts the head's block in block_count
      {"num_hidden_layers", num("block_count") - nextn_layers(g)},
      {"full_attention_interval", num("full_attention_interval")},
      {"rms_norm_eps", need(g, key("attention.layer_norm_rms_epsilon")).as_float("rms eps")},
      {"max_position_embeddings", num("context_length")},
      {"tie_word_embeddings", g.tensor("output.weight") == nullptr},
      {"num_attention_heads", num("attention.head_count")},
      {"num_key_value_heads", num("attention.head_count_kv")},
      {"head_dim", num("attention.key_length")},
      {"rope_theta", need(g, key("rope.freq_base")).as_float(key("rope.freq_base"))},
      {"partial_rotary_factor",
       static_cast<double>(num("rope.dimension_count")) / static_cast<double>(num("attention.key_length"))},
      {"linear_num_key_heads", num("ssm.group_count")},
      {"linear_num_value_heads", value_heads},
      {"linear_key_head_dim", num("ssm.state_size")},
      {"linear_value_head_dim", value_heads > 0 ? num("ssm.inner_size") / value_heads : 0},
      {"linear_conv_kernel_dim", num("ssm.conv_kernel")},
      {"num_experts", num("expert_count")},
      {"num_experts_per_tok", num("expert_used_count")},
      {"moe_intermediate_size", num("expert_feed_forward_length")},
      {"shared_expert_intermediate_size", num("expert_shared_feed_forward_length")},
  };
  if (const GgufValue* eos = g.find("tokenizer.ggml.eos_token_id")) c["eos_token_id"] = eos->as_int("eos");
  if (const GgufValue* bos = g.find("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = bos->as_int("bos");
  ModelConfig out = ModelConfig::parse(c.dump(), g.first().path() + " (GGUF metadata)");
  if (value_heads * out.linear_value_head_dim != num("ssm.inner_size"))
    throw Error(g.first().path() + ": " + key("ssm.inner_size") + " is not a multiple of " + key("ssm.time_step_rank"));
  out.model_type = "qwen35moe (GGUF)";
  out.gdn_tiled_value_heads = true;
  return out;
}

ModelWeights bind_gguf_weights(const GgufModel& g, const ModelConfig& c, LoadReport* report) {
  report->layout = CheckpointLayout::Gguf;
  GgufBinder b(g, report);
  ModelWeights w;
  const int64_t H = c.hidden_size, V = c.vocab_size, E = c.num_experts, I = c.moe_intermediate_size;
  w.embed = b.matrix("token_embd.weight", V, H);
  w.lm_head = b.has("output.weight") ? b.matrix("output.weight", V, H) : w.embed;
  w.final_norm = b.vec("output_norm.weight", {H});  // the 1 of (1+w) is baked in
  // block `i` under "blk.i.": Gated DeltaNet or attention, then the MoE
  auto bind_layer = [&](int64_t i, LayerKind kind, LayerWeights& L) {
    const std::string p = "blk." + std::to_string(i) + ".";
    L.kind = kind;
    L.input_norm = b.vec(p + "attn_norm.weight", {H});
    L.post_attention_norm = b.vec(p + "post_attention_norm.weight", {H});
    if (L.kind == LayerKind::LinearAttention) {
      GatedDeltaNetWeights& d = L.gdn;
      const int64_t conv = c.gdn_conv_dim(), vdim = c.gdn_value_dim(), Hv = c.linear_num_value_heads;
      d.in_qkv = b.matrix(p + "attn_qkv.weight", conv, H);
      d.in_z = b.matrix(p + "attn_gate.weight", vdim, H);
      d.in_b = b.matrix(p + "ssm_beta.weight", Hv, H);
      d.in_a = b.matrix(p + "ssm_alpha.weight", Hv, H);
      d.out = b.matrix(p + "ssm_out.weight", H, vdim);
      d.conv = b.vec(p + "ssm_conv1d.weight", {c.linear_conv_kernel, conv});
      d.neg_exp_a = b.vec(p + "ssm_a", {Hv});  // stored as -exp(A_log)
      d.dt_bias = b.vec(p + "ssm_dt.bias", {Hv});
      d.norm = b.vec(p + "ssm_norm.weight", {c.linear_value_head_dim});
    } else {
      AttentionWeights& a = L.attn;
      const int64_t hd = c.head_dim;
      a.q = b.matrix(p + "attn_q.weight", c.num_heads * 2 * hd, H);
      a.k = b.matrix(p + "attn_k.weight", c.num_kv_heads * hd, H);
      a.v = b.matrix(p + "attn_v.weight", c.num_kv_heads * hd, H);
      a.o = b.matrix(p + "attn_output.weight", H, c.num_heads * hd);
      a.q_norm = b.vec(p + "attn_q_norm.weight", {hd});
      a.k_norm = b.vec(p + "attn_k_norm.weight", {hd});
    }
    MoeWeights& m = L.moe;
    m.router = b.matrix(p + "ffn_gate_inp.weight", E, H);
    if (b.has(p + "ffn_gate_up_exps.weight")) {
      // Fused per expert: gate rows [0, I), then up rows [I, 2I).
      for (const Matrix& gu : b.matrices(p + "ffn_gate_up_exps.weight", 2 * I, H, E)) {
        Matrix gate = gu, up = gu;
        gate.rows = up.rows = I;
        up.data = static_cast<const uint8_t*>(gu.data) + static_cast<size_t>(I) * gu.row_bytes();
        m.gate.push_back(gate);
        m.up.push_back(up);
      }
      report->fused_experts = true;
    } else {
      m.gate = b.matrices(p + "ffn_gate_exps.weight", I, H, E);
      m.up = b.matrices(p + "ffn_up_exps.weight", I, H, E);
    }
    m.down = b.matrices(p + "ffn_down_exps.weight", H, I, E);
    const int64_t S = c.shared_expert_intermediate_size;
    m.shared_gate = b.matrix(p + "ffn_gate_shexp.weight", S, H);
    m.shared_up = b.matrix(p + "ffn_up_shexp.weight", S, H);
    m.shared_down = b.matrix(p + "ffn_down_shexp.weight", H, S);
    m.shared_expert_gate = b.view(b.need(p + "ffn_gate_inp_shexp.weight", {H}), 0, 1, H);
  };
  w.layers.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) bind_layer(i, c.layer_kinds[i], w.layers[i]);
  if (nextn_layers(g) == 1) {
    // the head: blk.L.nextn.* (eh_proj is the release's mtp.fc, enorm and
    // hnorm its pre-fc norms, shared_head_norm its final norm, the 1 of
    // (1+w) baked in as everywhere) and an attention block blk.L.*
    const std::string p = "blk." + std::to_string(c.num_layers) + ".nextn.";
    MtpWeights mtp;
    mtp.fc = b.matrix(p + "eh_proj.weight", H, 2 * H);
    mtp.embed_norm = b.vec(p + "enorm.weight", {H});
    mtp.hidden_norm = b.vec(p + "hnorm.weight", {H});
    mtp.final_norm = b.vec(p + "shared_head_norm.weight", {H});
    bind_layer(c.num_layers, LayerKind::FullAttention, mtp.layer);
    w.mtp = std::move(mtp);
  }
  for (const auto& [name, t] : g.tensors()) {
    if (b.used().count(name)) continue;
    if (name.find(".nextn.") != std::string::npos) report->skipped_groups["mtp (nextn)"]++;
    else report->ignored.push_back(name);
  }
  return w;
}

std::string gguf_tokenizer_json(const GgufModel& g) {
  const std::string model = need(g, "tokenizer.ggml.model").as_string("tokenizer.ggml.model");
  if (model != "gpt2")
    throw Error(g.first().path() + ": tokenizer.ggml.model is '" + model + "'; Lily reads byte-level BPE ('gpt2')");
  const std::string pre = g.find("tokenizer.ggml.pre") ? need(g, "tokenizer.ggml.pre").as_string("pre") : "qwen35";
  const GgufValue::Array& tokens = need(g, "tokenizer.ggml.tokens").as_array("tokenizer.ggml.tokens");
  const GgufValue::Array* types =
      g.find("tokenizer.ggml.token_type") ? &need(g, "tokenizer.ggml.token_type").as_array("token_type") : nullptr;
  if (types && types->size() != tokens.size())
    throw Error(g.first().path() + ": tokenizer.ggml.token_type has " + std::to_string(types->size()) + " entries for " +
                std::to_string(tokens.size()) + " tokens");
  unordered_json vocab = unordered_json::object(), added = unordered_json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& text = tokens[id].as_string("tokenizer.ggml.tokens");
    const int64_t type = types ? (*types)[id].as_int("tokenizer.ggml.token_type") : 1;
    if (type == 3 || type == 4)  // control and user-defined: matched whole, before the BPE
      added.push_back({{"id", id}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == 3}});
    else if (type != 5)  // unused padding entries are never produced
      vocab[text] = id;
  }
  unordered_json merges = unordered_json::array();
  if (const GgufValue* m = g.find("tokenizer.ggml.merges"))
    for (const GgufValue& x : m->as_array("tokenizer.ggml.merges")) merges.push_back(x.as_string("merges"));
  const unordered_json tokenizer = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", pre_tokenizer_regex(pre)}}}, {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
  return tokenizer.dump();
}

std::string gguf_chat_template(const GgufModel& g) {
  const GgufValue* t = g.find("tokenizer.chat_template");
  return t ? t->as_string("tokenizer.chat_template") : "";
}

}  // namespace lily
