#include "lily/tools/synth.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstring>
#include <vector>

#include "lily/error.h"
#include "lily/io/safetensors_writer.h"

namespace lily {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

// The text_config of Qwen3.6-35B-A3B with the first `layers` layers.
ordered_json text_config(int layers, int64_t vocab) {
  ordered_json types = ordered_json::array();
  for (int i = 0; i < layers; ++i) types.push_back(i % 4 == 3 ? "full_attention" : "linear_attention");
  return {{"model_type", "qwen3_5_moe_text"}, {"hidden_size", 2048}, {"num_hidden_layers", layers},
          {"layer_types", types}, {"full_attention_interval", 4}, {"num_attention_heads", 16},
          {"num_key_value_heads", 2}, {"head_dim", 256}, {"attn_output_gate", true}, {"attention_bias", false},
          {"linear_conv_kernel_dim", 4}, {"linear_key_head_dim", 128}, {"linear_value_head_dim", 128},
          {"linear_num_key_heads", 16}, {"linear_num_value_heads", 32}, {"num_experts", 256},
          {"num_experts_per_tok", 8}, {"moe_intermediate_size", 512}, {"shared_expert_intermediate_size", 512},
          {"hidden_act", "silu"}, {"rms_norm_eps", 1e-6}, {"partial_rotary_factor", 0.25},
          {"rope_parameters", {{"mrope_interleaved", true}, {"mrope_section", {11, 11, 10}}, {"partial_rotary_factor", 0.25},
                               {"rope_theta", 10000000}, {"rope_type", "default"}}},
          {"max_position_embeddings", 262144}, {"vocab_size", vocab}, {"tie_word_embeddings", false},
          {"bos_token_id", 248044}, {"eos_token_id", 248044}, {"dtype", "bfloat16"}};
}

class Rng {  // xorshift64*: fast and good enough for benchmark weights
 public:
  explicit Rng(uint64_t s) : s_(s * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }  // [-1, 1)

 private:
  uint64_t s_;
};

struct PlannedTensor {
  enum Kind { Random, Ones, Constant, Packed, Scales, Biases } kind;
  float scale;  // Random: amplitude; Constant: value; Scales/Biases: the weight's amplitude
  int bits = 0;
  DType dtype = DType::BF16;
};

}  // namespace

void write_synth_checkpoint(const std::string& dir, const SynthOptions& opt) {
  int bits = 0;
  if (opt.format == "mlx4") bits = 4;
  else if (opt.format == "mlx6") bits = 6;
  else if (opt.format == "mlx8") bits = 8;
  else if (opt.format != "bf16") throw Error("--format must be bf16, mlx4, mlx6 or mlx8, got '" + opt.format + "'");
  if (opt.layers < 1 || opt.layers > 40) throw Error("--layers must be between 1 and 40");
  if (opt.mtp && bits > 0)
    throw Error("--mtp writes the MTP head of the official release; MLX conversions drop it, so use --format bf16");
  const bool mlx = bits > 0;
  const int gs = 64;
  const int64_t H = 2048, E = 256, I = 512, S = 512, V = opt.vocab;
  const int64_t qk = 16 * 128, vd = 32 * 128, conv = 2 * qk + vd;
  fs::create_directories(dir);

  SafetensorsStreamWriter w;
  w.set_metadata("format", mlx ? "mlx" : "pt");
  std::vector<PlannedTensor> plan;
  const std::string p0 = mlx ? "language_model.model." : "model.language_model.";
  ordered_json qcfg = {{"group_size", gs}, {"bits", bits}, {"mode", "affine"}};
  auto vec = [&](const std::string& name, std::vector<int64_t> shape, PlannedTensor t, DType dt = DType::BF16) {
    w.declare(name, dt, std::move(shape));
    t.dtype = dt;
    plan.push_back(t);
  };
  // A weight [lead..., rows, cols]: bf16 values, or MLX packed + scales + biases.
  auto matrix = [&](const std::string& base, std::vector<int64_t> lead, int64_t rows, int64_t cols, bool gate,
                    const std::string& hf_name = "") {
    std::vector<int64_t> shape = lead;
    shape.push_back(rows);
    const float amp = 1.7f / std::sqrt(static_cast<float>(cols));
    if (!mlx) {
      shape.push_back(cols);
      vec(hf_name.empty() ? base + ".weight" : hf_name, shape, {PlannedTensor::Random, amp});
      return;
    }
    const int b = gate ? 8 : bits;
    if (gate) qcfg[base] = {{"group_size", gs}, {"bits", 8}};
    std::vector<int64_t> packed = shape, groups = shape;
    packed.push_back(cols * b / 32);
    groups.push_back(cols / gs);
    vec(base + ".weight", packed, {PlannedTensor::Packed, 0, b}, DType::U32);
    vec(base + ".scales", groups, {PlannedTensor::Scales, amp, b});
    vec(base + ".biases", groups, {PlannedTensor::Biases, amp, b});
  };

  const float norm_base = mlx ? 1.0f : 0.0f;  // MLX stores the +1 of zero-centred norms
  // One decoder layer under `p`: gated attention or Gated DeltaNet, then the MoE.
  auto layer = [&](const std::string& p, bool attention) {
    vec(p + "input_layernorm.weight", {H}, {PlannedTensor::Constant, norm_base});
    vec(p + "post_attention_layernorm.weight", {H}, {PlannedTensor::Constant, norm_base});
    if (attention) {
      matrix(p + "self_attn.q_proj", {}, 16 * 2 * 256, H, false);
      matrix(p + "self_attn.k_proj", {}, 2 * 256, H, false);
      matrix(p + "self_attn.v_proj", {}, 2 * 256, H, false);
      matrix(p + "self_attn.o_proj", {}, H, 16 * 256, false);
      vec(p + "self_attn.q_norm.weight", {256}, {PlannedTensor::Constant, norm_base});
      vec(p + "self_attn.k_norm.weight", {256}, {PlannedTensor::Constant, norm_base});
    } else {
      const std::string a = p + "linear_attn.";
      matrix(a + "in_proj_qkv", {}, conv, H, false);
      matrix(a + "in_proj_z", {}, vd, H, false);
      matrix(a + "in_proj_b", {}, 32, H, false);
      matrix(a + "in_proj_a", {}, 32, H, false);
      matrix(a + "out_proj", {}, H, vd, false);
      vec(a + "conv1d.weight", mlx ? std::vector<int64_t>{conv, 4, 1} : std::vector<int64_t>{conv, 1, 4}, {PlannedTensor::Random, 0.5f});
      vec(a + "A_log", {32}, {PlannedTensor::Random, 1.0f}, DType::F32);
      vec(a + "dt_bias", {32}, {PlannedTensor::Random, 0.5f});
      vec(a + "norm.weight", {128}, {PlannedTensor::Ones, 1.0f}, DType::F32);
    }
    const std::string m = p + "mlp.";
    matrix(m + "gate", {}, E, H, true);
    if (mlx) {
      matrix(m + "switch_mlp.gate_proj", {E}, I, H, false);
      matrix(m + "switch_mlp.up_proj", {E}, I, H, false);
      matrix(m + "switch_mlp.down_proj", {E}, H, I, false);
    } else {
      matrix(m + "experts.gate_up_proj", {E}, 2 * I, H, false, m + "experts.gate_up_proj");
      matrix(m + "experts.down_proj", {E}, H, I, false, m + "experts.down_proj");
    }
    matrix(m + "shared_expert.gate_proj", {}, S, H, false);
    matrix(m + "shared_expert.up_proj", {}, S, H, false);
    matrix(m + "shared_expert.down_proj", {}, H, S, false);
    matrix(m + "shared_expert_gate", {}, 1, H, true);
  };

  matrix(p0 + "embed_tokens", {}, V, H, false);
  for (int l = 0; l < opt.layers; ++l) layer(p0 + "layers." + std::to_string(l) + ".", l % 4 == 3);
  if (opt.mtp) {  // the release's MTP head: fc over [norm(embedding) | norm(hidden)], one attention layer
    matrix("mtp.fc", {}, H, 2 * H, false);
    for (const char* n : {"mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"})
      vec(n, {H}, {PlannedTensor::Constant, 0.0f});
    layer("mtp.layers.0.", true);
  }
  vec(p0 + "norm.weight", {H}, {PlannedTensor::Constant, norm_base});
  matrix(mlx ? "language_model.lm_head" : "lm_head", {}, V, H, false);

  // config.json: the release's nested form; MLX adds its quantization block
  ordered_json cfg = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}, {"model_type", "qwen3_5_moe"},
                      {"text_config", text_config(opt.layers, V)}, {"tie_word_embeddings", false}};
  if (mlx) {
    cfg["quantization"] = qcfg;
    cfg["quantization_config"] = qcfg;
  }
  std::ofstream(fs::path(dir) / "config.json") << cfg.dump(2) << "\n";

  Rng rng(opt.seed);
  std::vector<char> buf;
  w.write((fs::path(dir) / "model.safetensors").string(), [&](size_t i, size_t bytes, std::ostream& out) {
    const PlannedTensor& t = plan[i];
    const float levels = static_cast<float>((1 << std::max(t.bits, 1)) - 1);
    while (bytes > 0) {  // in 4 MiB pieces
      const size_t n = std::min<size_t>(bytes, 4u << 20);
      buf.resize(n);
      auto value = [&]() {
        switch (t.kind) {
          case PlannedTensor::Random: return rng.uniform() * t.scale;
          case PlannedTensor::Ones: return 1.0f;
          case PlannedTensor::Constant: return t.scale;
          case PlannedTensor::Scales: return 2.0f * t.scale / levels;  // the grid spans [-amp, amp]
          default: return -t.scale;                              // Biases
        }
      };
      if (t.kind == PlannedTensor::Packed) {
        for (size_t k = 0; k < n; k += 8) {
          const uint64_t r = rng.next();
          std::memcpy(&buf[k], &r, std::min<size_t>(8, n - k));
        }
      } else if (t.dtype == DType::F32) {
        for (size_t k = 0; k < n; k += 4) {
          const float v = value();
          std::memcpy(&buf[k], &v, 4);
        }
      } else {
        for (size_t k = 0; k < n; k += 2) {
          const uint16_t h = float_to_bf16(value());
          std::memcpy(&buf[k], &h, 2);
        }
      }
      out.write(buf.data(), static_cast<std::streamsize>(n));
      bytes -= n;
    }
  });
}

}  // namespace lily
