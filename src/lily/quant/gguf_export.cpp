#include "lily/quant/gguf_export.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/io/dtype.h"
#include "lily/io/gguf_writer.h"
#include "lily/model/model.h"
#include "lily/quant/gguf_quantize.h"

namespace lily::quant {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct GgufFloats {
  std::vector<float> v;
  std::vector<int64_t> shape;  // row-major, slowest first
};

GgufFloats gguf_floats(const TensorView& t) {
  GgufFloats f{std::vector<float>(static_cast<size_t>(t.numel())), t.shape};
  convert_to_float(t.dtype, t.data, f.v.data(), f.v.size());
  return f;
}

// Moves the value heads along `axis` of a row-major [outer, V * head, inner]
// view from grouped order (head v = k * r + j) to tiled order (v = j * K + k).
std::vector<float> tiled(const std::vector<float>& a, int64_t outer, int64_t inner, int64_t K, int64_t V, int64_t head) {
  const int64_t r = V / K;
  std::vector<float> out(a.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < r; ++j) {
        const int64_t from = k * r + j, to = j * K + k;
        for (int64_t h = 0; h < head; ++h)
          std::copy_n(a.begin() + ((o * V + from) * head + h) * inner, inner, out.begin() + ((o * V + to) * head + h) * inner);
      }
  return out;
}

int llama_ftype(const std::string& type) {
  static const std::map<std::string, int> f = {{"f32", 0}, {"f16", 1}, {"q4_0", 2}, {"q8_0", 7},
                                               {"q4_k_m", 15}, {"q6_k", 18}, {"bf16", 32}};
  const auto it = f.find(type);
  if (it == f.end()) throw Error("--gguf " + type + " is not a type lily writes (f32, f16, bf16, q8_0, q4_0, q4_k_m, q6_k)");
  return it->second;
}

// llama.cpp gives these layers more bits in its _M mixes.
bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool contains(const std::string& s, const char* t) { return s.find(t) != std::string::npos; }

class GgufTensorWriter {
 public:
  GgufTensorWriter(const Model& m, const std::string& type) : m_(m), c_(m.config()), type_(type) {}

  // The ggml type of a matrix named `name` ([rows, cols] row-major) in layer `layer` (-1 outside).
  GgmlType type_of(const std::string& name, int64_t cols, int64_t layer) const {
    GgmlType t = GgmlType::F32;
    if (type_ == "f16") t = GgmlType::F16;
    else if (type_ == "bf16") t = GgmlType::BF16;
    else if (type_ == "q8_0") t = GgmlType::Q8_0;
    else if (type_ == "q4_0") t = GgmlType::Q4_0;
    else if (type_ == "q6_k") t = GgmlType::Q6_K;
    else if (type_ == "q4_k_m") {
      t = GgmlType::Q4_K;
      if (name == "output.weight") t = GgmlType::Q6_K;
      if (contains(name, "attn_v.weight") && more_bits(attention_index(layer), c_.num_layers_of(LayerKind::FullAttention)))
        t = GgmlType::Q6_K;
      if (contains(name, "ffn_down") && more_bits(layer, c_.num_layers)) t = GgmlType::Q6_K;
    }
    // Rows that do not split into the type's blocks fall back as llama.cpp's
    // quantizer does, to a type they do split into.
    int64_t be = 0, bb = 0;
    ggml_block_layout(t, &be, &bb);
    if (cols % be != 0) t = cols % 32 == 0 && t != GgmlType::F32 ? GgmlType::Q8_0 : GgmlType::F32;
    if (t == GgmlType::Q8_0 && (type_ == "f16" || type_ == "bf16")) t = GgmlType::F16;
    return t;
  }

  int64_t attention_index(int64_t layer) const {
    int64_t n = 0;
    for (int64_t i = 0; i < layer; ++i) n += c_.layer_kinds[i] == LayerKind::FullAttention;
    return n;
  }

  // A matrix (or a stack of them) quantized by name; vectors stay F32.
  void matrix(GgufWriter& w, const std::string& name, std::function<GgufFloats()> get, std::vector<int64_t> shape,
              int64_t layer) {
    const int64_t cols = shape.back();
    const GgmlType t = type_of(name, cols, layer);
    std::vector<int64_t> ggml_shape(shape.rbegin(), shape.rend());
    w.add_tensor(name, t, ggml_shape, [get, t, cols] {
      const GgufFloats f = get();
      return quantize_gguf(t, f.v.data(), static_cast<int64_t>(f.v.size()) / cols, cols);
    });
    ++counts_[ggml_type_name(t)];
  }
  void vector(GgufWriter& w, const std::string& name, std::function<GgufFloats()> get, std::vector<int64_t> shape) {
    std::vector<int64_t> ggml_shape(shape.rbegin(), shape.rend());
    w.add_tensor(name, GgmlType::F32, ggml_shape, [get] {
      const GgufFloats f = get();
      return std::string(reinterpret_cast<const char*>(f.v.data()), f.v.size() * 4);
    });
    ++counts_["F32"];
  }
  const std::map<std::string, int>& counts() const { return counts_; }

 private:
  const Model& m_;
  const ModelConfig& c_;
  std::string type_;
  std::map<std::string, int> counts_;
};

// tokenizer.json's vocabulary, merges and added tokens as llama.cpp's
// tokenizer.ggml.* keys (gpt2-style BPE, Qwen's pre-tokenizer). A checkpoint
// without a tokenizer (a test fixture) gives a file without one.
void add_tokenizer(GgufWriter& w, const fs::path& dir, const ModelConfig& c) {
  if (!fs::exists(dir / "tokenizer.json")) return;
  const json tok = parse_json(read_regular_file((dir / "tokenizer.json").string(), size_t(64) << 20),
                              (dir / "tokenizer.json").string());
  const json& model = tok.at("model");
  if (model.value("type", "") != "BPE") throw Error((dir / "tokenizer.json").string() + ": not a BPE tokenizer");
  int64_t n = c.vocab_size;
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;  // id -> (text, token type)
  for (const auto& [text, id] : model.at("vocab").items()) by_id[id.get<int64_t>()] = {text, 1};
  for (const json& a : tok.value("added_tokens", json::array()))
    by_id[a.at("id").get<int64_t>()] = {a.at("content").get<std::string>(), a.value("special", false) ? 3 : 4};
  if (!by_id.empty()) n = std::max(n, by_id.rbegin()->first + 1);
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<int32_t> types(static_cast<size_t>(n), 5);  // unused padding rows of the embedding
  for (int64_t id = 0; id < n; ++id) {
    const auto it = by_id.find(id);
    if (it == by_id.end()) {
      tokens[id] = "[PAD" + std::to_string(id) + "]";
    } else {
      tokens[id] = it->second.first;
      types[id] = it->second.second;
    }
  }
  std::vector<std::string> merges;
  for (const json& m : model.value("merges", json::array()))
    merges.push_back(m.is_string() ? m.get<std::string>() : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  // The split regex tells Qwen3.5/3.6's pre-tokenizer (letters with marks) from Qwen2's.
  const std::string dumped = tok.value("pre_tokenizer", json::object()).dump();
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", contains(dumped, "\\\\p{M}") ? "qwen35" : "qwen2");
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_int32s("tokenizer.ggml.token_type", types);
  w.add_strings("tokenizer.ggml.merges", merges);
  if (c.bos_token_id >= 0) w.add_uint32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(c.bos_token_id));
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  std::string tmpl;
  if (fs::exists(dir / "chat_template.jinja")) {
    tmpl = read_regular_file((dir / "chat_template.jinja").string(), size_t(1) << 20);
  } else if (fs::exists(dir / "tokenizer_config.json")) {
    const json tc = parse_json(read_regular_file((dir / "tokenizer_config.json").string(), size_t(16) << 20),
                               (dir / "tokenizer_config.json").string());
    if (tc.contains("chat_template") && tc["chat_template"].is_string()) tmpl = tc["chat_template"];
  }
  if (!tmpl.empty()) w.add_string("tokenizer.chat_template", tmpl);
}

// The multimodal RoPE sections llama.cpp's qwen35moe loader requires: the
// checkpoint's mrope_section padded to four, else the whole rotary half in
// the first (text positions are the same in every section, so both rotate
// text alike).
std::vector<int32_t> rope_sections(const fs::path& dir, const ModelConfig& c) {
  const json cfg = parse_json(read_regular_file((dir / "config.json").string(), ModelConfig::kMaxConfigBytes),
                              (dir / "config.json").string());
  const json& text = cfg.contains("text_config") && cfg["text_config"].is_object() ? cfg["text_config"] : cfg;
  std::vector<int32_t> out;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!text.contains(key) || !text[key].is_object() || !text[key].contains("mrope_section")) continue;
    for (const json& v : text[key]["mrope_section"])
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
    break;
  }
  int64_t sum = 0;
  for (int32_t v : out) sum += v;
  if (out.empty() || out.size() > 4 || sum != c.rotary_dim / 2) out = {static_cast<int32_t>(c.rotary_dim / 2)};
  out.resize(4, 0);
  return out;
}

}  // namespace

void export_gguf(const std::string& src, const std::string& dst, const GgufExportOptions& opt) {
  const int ftype = llama_ftype(opt.type);
  auto model = Model::load(src);
  const LoadReport& rep = model->report();
  if (rep.layout != CheckpointLayout::HfRelease && rep.layout != CheckpointLayout::HfTextModel)
    throw Error(src + " is a " + std::string(layout_name(rep.layout)) +
                " checkpoint; lily quantize --gguf reads Hugging Face checkpoints (BF16, F16 or F32)");
  const ModelConfig& c = model->config();
  const SafetensorsArchive& a = model->archive();
  for (const auto& [name, t] : a.tensors())
    if (t->dtype != DType::BF16 && t->dtype != DType::F16 && t->dtype != DType::F32)
      throw Error(src + ": tensor " + name + " is " + std::string(dtype_name(t->dtype)) +
                  "; lily quantize --gguf reads BF16, F16 or F32 weights");
  const std::string in = rep.layout == CheckpointLayout::HfRelease ? "model.language_model." : "model.";
  auto get = [&a](const std::string& name) -> const TensorView& {
    const TensorView* t = a.find(name);
    if (!t) throw Error("tensor " + name + " is missing");
    return *t;
  };
  auto plain = [&get](const std::string& name) { return [&get, name] { return gguf_floats(get(name)); }; };
  auto plus_one = [&get](const std::string& name) {
    return [&get, name] {
      GgufFloats f = gguf_floats(get(name));
      for (float& x : f.v) x += 1.0f;  // llama.cpp stores the plain multiplier of a (1 + w) norm
      return f;
    };
  };

  GgufWriter w;
  const std::string A = "qwen35moe.";
  int64_t interval = 0;
  for (int64_t i = 0; i < c.num_layers; ++i)
    if (c.layer_kinds[i] == LayerKind::FullAttention) {
      interval = i + 1;
      break;
    }
  for (int64_t i = 0; i < c.num_layers; ++i)
    if ((c.layer_kinds[i] == LayerKind::FullAttention) != (interval > 0 && (i + 1) % interval == 0))
      throw Error("the layer pattern is not one full-attention layer every N: GGUF's qwen35moe cannot say it");
  w.add_string("general.architecture", "qwen35moe");
  w.add_string("general.name", fs::path(src).lexically_normal().filename().string());
  w.add_uint32("general.file_type", static_cast<uint32_t>(ftype));
  w.add_uint32("general.quantization_version", 2);
  // The numbers llama.cpp's qwen35moe loader reads, and the two it reads as floats.
  const bool mtp = model->weights().mtp.has_value();
  const std::pair<const char*, int64_t> numbers[] = {
      {"block_count", c.num_layers + (mtp ? 1 : 0)}, {"context_length", c.max_position_embeddings},
      {"embedding_length", c.hidden_size}, {"attention.head_count", c.num_heads},
      {"attention.head_count_kv", c.num_kv_heads}, {"attention.key_length", c.head_dim},
      {"attention.value_length", c.head_dim}, {"rope.dimension_count", c.rotary_dim},
      {"expert_count", c.num_experts}, {"expert_used_count", c.experts_per_token},
      {"expert_feed_forward_length", c.moe_intermediate_size},
      {"expert_shared_feed_forward_length", c.shared_expert_intermediate_size},
      {"ssm.conv_kernel", c.linear_conv_kernel}, {"ssm.state_size", c.linear_key_head_dim},
      {"ssm.group_count", c.linear_num_key_heads}, {"ssm.time_step_rank", c.linear_num_value_heads},
      {"ssm.inner_size", c.gdn_value_dim()}, {"full_attention_interval", interval}};
  for (const auto& [key, value] : numbers) w.add_uint32(A + key, static_cast<uint32_t>(value));
  if (mtp) w.add_uint32(A + "nextn_predict_layers", 1);
  w.add_float32(A + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.add_float32(A + "rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_int32s(A + "rope.dimension_sections", rope_sections(fs::path(src), c));
  if (!c.eos_token_ids.empty()) w.add_uint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_token_ids[0]));
  if (c.bos_token_id >= 0) w.add_uint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(c.bos_token_id));
  add_tokenizer(w, fs::path(src), c);

  GgufTensorWriter ex(*model, opt.type);
  const int64_t H = c.hidden_size, K = c.linear_num_key_heads, V = c.linear_num_value_heads;
  const int64_t dv = c.linear_value_head_dim, kd = c.gdn_key_dim(), E = c.num_experts, I = c.moe_intermediate_size;
  ex.matrix(w, "token_embd.weight", plain(in + "embed_tokens.weight"), get(in + "embed_tokens.weight").shape, -1);
  ex.vector(w, "output_norm.weight", plus_one(in + "norm.weight"), {H});
  if (a.find("lm_head.weight") && !c.tie_word_embeddings)
    ex.matrix(w, "output.weight", plain("lm_head.weight"), get("lm_head.weight").shape, -1);
  // One decoder layer: the Hugging Face tensors under `p` as block `i` ("blk.i.").
  auto write_layer = [&](const std::string& p, int64_t i, LayerKind kind) {
    const std::string b = "blk." + std::to_string(i) + ".";
    ex.vector(w, b + "attn_norm.weight", plus_one(p + "input_layernorm.weight"), {H});
    ex.vector(w, b + "post_attention_norm.weight", plus_one(p + "post_attention_layernorm.weight"), {H});
    if (kind == LayerKind::LinearAttention) {
      const std::string q = p + "linear_attn.";
      const int64_t conv_dim = c.gdn_conv_dim();
      // The value rows of the qkv projection and the conv, and every tensor of value heads, tiled.
      ex.matrix(w, b + "attn_qkv.weight", [&get, q, kd, K, V, dv, H] {
        GgufFloats f = gguf_floats(get(q + "in_proj_qkv.weight"));
        const std::vector<float> v(f.v.begin() + 2 * kd * H, f.v.end());
        const std::vector<float> t = tiled(v, 1, H, K, V, dv);
        std::copy(t.begin(), t.end(), f.v.begin() + 2 * kd * H);
        return f;
      }, {conv_dim, H}, i);
      ex.matrix(w, b + "attn_gate.weight", [&get, q, K, V, dv, H] {
        GgufFloats f = gguf_floats(get(q + "in_proj_z.weight"));
        f.v = tiled(f.v, 1, H, K, V, dv);
        return f;
      }, {V * dv, H}, i);
      for (const auto& [hf, gg] : {std::pair{"in_proj_b", "ssm_beta"}, std::pair{"in_proj_a", "ssm_alpha"}})
        ex.vector(w, b + gg + ".weight", [&get, q, hf = std::string(hf), K, V, H] {
          GgufFloats f = gguf_floats(get(q + hf + ".weight"));
          f.v = tiled(f.v, 1, H, K, V, 1);
          return f;
        }, {V, H});
      ex.matrix(w, b + "ssm_out.weight", [&get, q, K, V, dv, H] {
        GgufFloats f = gguf_floats(get(q + "out_proj.weight"));  // [H, V * dv]: columns are value heads
        f.v = tiled(f.v, H, 1, K, V, dv);
        return f;
      }, {H, V * dv}, i);
      const int64_t kern = c.linear_conv_kernel;
      ex.vector(w, b + "ssm_conv1d.weight", [&get, q, kd, K, V, dv, kern] {
        GgufFloats f = gguf_floats(get(q + "conv1d.weight"));  // [C, 1, kernel] -> [C, kernel]
        const std::vector<float> v(f.v.begin() + 2 * kd * kern, f.v.end());
        const std::vector<float> t = tiled(v, 1, kern, K, V, dv);
        std::copy(t.begin(), t.end(), f.v.begin() + 2 * kd * kern);
        return f;
      }, {conv_dim, kern});
      ex.vector(w, b + "ssm_a", [&get, q, K, V] {
        GgufFloats f = gguf_floats(get(q + "A_log"));
        for (float& x : f.v) x = -std::exp(x);
        f.v = tiled(f.v, 1, 1, K, V, 1);
        return f;
      }, {V});
      ex.vector(w, b + "ssm_dt.bias", [&get, q, K, V] {
        GgufFloats f = gguf_floats(get(q + "dt_bias"));
        f.v = tiled(f.v, 1, 1, K, V, 1);
        return f;
      }, {V});
      ex.vector(w, b + "ssm_norm.weight", plain(q + "norm.weight"), {c.linear_value_head_dim});
    } else {
      const std::string s = p + "self_attn.";
      const int64_t hd = c.head_dim;
      for (const auto& [hf, gg] : {std::pair{"q_proj", "attn_q"}, std::pair{"k_proj", "attn_k"}, std::pair{"v_proj", "attn_v"},
                                   std::pair{"o_proj", "attn_output"}})
        ex.matrix(w, b + gg + ".weight", plain(s + hf + ".weight"), get(s + hf + ".weight").shape, i);
      ex.vector(w, b + "attn_q_norm.weight", plus_one(s + "q_norm.weight"), {hd});
      ex.vector(w, b + "attn_k_norm.weight", plus_one(s + "k_norm.weight"), {hd});
    }
    const std::string m = p + "mlp.";
    ex.vector(w, b + "ffn_gate_inp.weight", plain(m + "gate.weight"), {E, H});
    const bool fused = a.find(m + "experts.gate_up_proj") != nullptr;
    // Experts stacked [E, rows, cols]: from the fused tensors or expert by expert.
    auto stacked = [&get, m, E, I, H, fused](const std::string& proj) {
      return [&get, m, E, I, H, fused, proj] {
        GgufFloats out{{}, {}};
        if (fused && proj != "down_proj") {
          const GgufFloats f = gguf_floats(get(m + "experts.gate_up_proj"));  // [E, 2I, H]: gate rows then up rows
          const int64_t off = proj == "gate_proj" ? 0 : I * H;
          for (int64_t e = 0; e < E; ++e)
            out.v.insert(out.v.end(), f.v.begin() + e * 2 * I * H + off, f.v.begin() + e * 2 * I * H + off + I * H);
        } else if (fused) {
          out.v = gguf_floats(get(m + "experts.down_proj")).v;
        } else {
          for (int64_t e = 0; e < E; ++e) {
            const GgufFloats f = gguf_floats(get(m + "experts." + std::to_string(e) + "." + proj + ".weight"));
            out.v.insert(out.v.end(), f.v.begin(), f.v.end());
          }
        }
        return out;
      };
    };
    ex.matrix(w, b + "ffn_gate_exps.weight", stacked("gate_proj"), {E, I, H}, i);
    ex.matrix(w, b + "ffn_up_exps.weight", stacked("up_proj"), {E, I, H}, i);
    ex.matrix(w, b + "ffn_down_exps.weight", stacked("down_proj"), {E, H, I}, i);
    for (const auto& [hf, gg] : {std::pair{"gate_proj", "ffn_gate_shexp"}, std::pair{"up_proj", "ffn_up_shexp"},
                                 std::pair{"down_proj", "ffn_down_shexp"}})
      ex.matrix(w, b + gg + ".weight", plain(m + "shared_expert." + hf + ".weight"),
                get(m + "shared_expert." + hf + ".weight").shape, i);
    ex.vector(w, b + "ffn_gate_inp_shexp.weight", plain(m + "shared_expert_gate.weight"), {H});
  };
  for (int64_t i = 0; i < c.num_layers; ++i)
    write_layer(in + "layers." + std::to_string(i) + ".", i, c.layer_kinds[i]);
  if (mtp) {
    // the MTP head as llama.cpp's MTP GGUFs carry it: block L with nextn.* beside its attention layer
    const std::string b = "blk." + std::to_string(c.num_layers) + ".nextn.";
    ex.matrix(w, b + "eh_proj.weight", plain("mtp.fc.weight"), {H, 2 * H}, c.num_layers);
    ex.vector(w, b + "enorm.weight", plus_one("mtp.pre_fc_norm_embedding.weight"), {H});
    ex.vector(w, b + "hnorm.weight", plus_one("mtp.pre_fc_norm_hidden.weight"), {H});
    ex.vector(w, b + "shared_head_norm.weight", plus_one("mtp.norm.weight"), {H});
    write_layer("mtp.layers.0.", c.num_layers, LayerKind::FullAttention);
  }
  if (fs::path(dst).has_parent_path()) fs::create_directories(fs::path(dst).parent_path());
  w.write(dst);
  // What was written must load: the same checks as any GGUF file.
  Model::load(dst);
}

}  // namespace lily::quant
