#include "lily/quant/mlx_export.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstring>
#include <sstream>

#include "lily/error.h"
#include "lily/io/safetensors_writer.h"
#include "lily/model/model.h"
#include "lily/quant/affine.h"

namespace lily::quant {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

std::vector<float> floats(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  convert_to_float(t.dtype, t.data, v.data(), v.size());
  return v;
}

std::string to_bytes(const std::vector<float>& v, DType dtype) {
  std::string out(v.size() * dtype_size(dtype), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(&out[i * 4], &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::BF16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

class Exporter {
 public:
  Exporter(const ExportOptions& o) : opt_(o) {
    qcfg_ = {{"group_size", o.group_size}, {"bits", o.bits}, {"mode", "affine"}};
  }

  void plain(const std::string& name, const TensorView& t, std::vector<int64_t> shape = {}) {
    w_.add(name, t.dtype, shape.empty() ? t.shape : shape, t.data, t.nbytes);
  }
  void plain_floats(const std::string& name, DType dtype, std::vector<int64_t> shape, const std::vector<float>& v) {
    const std::string b = to_bytes(v, dtype);
    w_.add(name, dtype, std::move(shape), b.data(), b.size());
  }

  // Quantizes a [lead..., rows, cols] weight written as `base`.{weight,scales,biases}.
  void quantized(const std::string& base, DType dtype, std::vector<int64_t> lead, int64_t rows, int64_t cols,
                 const std::vector<float>& v, int bits, int gs) {
    std::vector<int64_t> shape = lead;
    shape.push_back(rows);
    shape.push_back(cols);
    if (cols % gs != 0) {  // as mlx-lm: a layer whose width does not split into groups stays unquantized
      plain_floats(base + ".weight", dtype, shape, v);
      qcfg_[base] = false;
      return;
    }
    int64_t count = 1;
    for (int64_t d : lead) count *= d;
    const QuantizedRows q = quantize(v.data(), count * rows, cols, bits, gs);
    std::vector<int64_t> packed = lead, groups = lead;
    packed.push_back(rows);
    packed.push_back(cols * bits / 32);
    groups.push_back(rows);
    groups.push_back(cols / gs);
    w_.add(base + ".weight", DType::U32, packed, q.packed.data(), q.packed.size());
    plain_floats(base + ".scales", dtype, groups, q.scales);
    plain_floats(base + ".biases", dtype, groups, q.biases);
    if (bits != opt_.bits || gs != opt_.group_size) qcfg_[base] = {{"group_size", gs}, {"bits", bits}};
  }
  void quantized(const std::string& base, const TensorView& t, int bits, int gs) {
    std::vector<int64_t> lead(t.shape.begin(), t.shape.end() - 2);
    quantized(base, t.dtype, lead, t.shape[t.shape.size() - 2], t.shape.back(), floats(t), bits, gs);
  }

  void write(const std::string& path) {
    w_.set_metadata("format", "mlx");
    w_.write(path);
  }
  const ordered_json& quantization() const { return qcfg_; }
  const ExportOptions& opt() const { return opt_; }

 private:
  ExportOptions opt_;
  SafetensorsWriter w_;
  ordered_json qcfg_;
};

}  // namespace

void export_mlx(const std::string& src, const std::string& dst, const ExportOptions& opt) {
  if (!supported_bits(opt.bits)) throw Error("--bits " + std::to_string(opt.bits) + " is not supported (2, 3, 4, 5, 6 or 8)");
  if (!supported_group_size(opt.group_size))
    throw Error("--group-size " + std::to_string(opt.group_size) + " is not supported (32, 64 or 128)");
  auto model = Model::load(src);
  const LoadReport& rep = model->report();
  if (rep.layout == CheckpointLayout::Mlx) throw Error(src + " is already an MLX checkpoint");
  const ModelConfig& c = model->config();
  const SafetensorsArchive& a = model->archive();
  const std::string in = rep.layout == CheckpointLayout::HfRelease ? "model.language_model." : "model.";
  const std::string out = "language_model.model.";
  Exporter ex(opt);

  for (const auto& [name, t] : a.tensors()) {
    std::string rel;
    if (name == "lm_head.weight") {
      ex.quantized("language_model.lm_head", *t, opt.bits, opt.group_size);
      continue;
    }
    if (name.rfind(in, 0) != 0) continue;  // vision tower and MTP head are not part of the text model
    rel = name.substr(in.size());
    const std::string base = out + rel.substr(0, ends_with(rel, ".weight") ? rel.size() - 7 : rel.size());
    const size_t experts_at = rel.find(".mlp.experts.");
    if (experts_at != std::string::npos) {
      const std::string layer = out + rel.substr(0, experts_at) + ".mlp.switch_mlp.";
      const int64_t E = c.num_experts, I = c.moe_intermediate_size, H = c.hidden_size;
      const std::string tail = rel.substr(experts_at + 13);
      if (tail == "gate_up_proj") {  // [E, 2I, H]: gate rows then up rows per expert
        const std::vector<float> v = floats(*t);
        std::vector<float> g, u;
        for (int64_t e = 0; e < E; ++e) {
          g.insert(g.end(), v.begin() + e * 2 * I * H, v.begin() + (e * 2 + 1) * I * H);
          u.insert(u.end(), v.begin() + (e * 2 + 1) * I * H, v.begin() + (e + 1) * 2 * I * H);
        }
        ex.quantized(layer + "gate_proj", t->dtype, {E}, I, H, g, opt.bits, opt.group_size);
        ex.quantized(layer + "up_proj", t->dtype, {E}, I, H, u, opt.bits, opt.group_size);
      } else if (tail == "down_proj") {
        ex.quantized(layer + "down_proj", *t, opt.bits, opt.group_size);
      } else if (tail.rfind("0.", 0) == 0) {  // per-expert tensors: stacked once, at expert 0
        const std::string proj = tail.substr(2, tail.size() - 2 - 7);  // gate_proj / up_proj / down_proj
        const std::string prefix = name.substr(0, name.size() - tail.size());
        std::vector<float> all;
        for (int64_t e = 0; e < E; ++e) {
          const auto v = floats(*a.find(prefix + std::to_string(e) + "." + proj + ".weight"));
          all.insert(all.end(), v.begin(), v.end());
        }
        ex.quantized(layer + proj, t->dtype, {E}, t->shape[0], t->shape[1], all, opt.bits, opt.group_size);
      }
      continue;
    }
    const bool centred_norm = ends_with(rel, "layernorm.weight") || rel == "norm.weight" ||
                              ends_with(rel, "q_norm.weight") || ends_with(rel, "k_norm.weight");
    if (centred_norm) {
      std::vector<float> v = floats(*t);
      for (float& x : v) x += 1.0f;  // MLX stores the plain multiplier
      ex.plain_floats(out + rel, t->dtype, t->shape, v);
    } else if (ends_with(rel, "conv1d.weight")) {
      ex.plain(out + rel, *t, {t->shape[0], t->shape[2], 1});
    } else if (ends_with(rel, ".weight") && t->shape.size() == 2 && !ends_with(rel, "linear_attn.norm.weight")) {
      const bool gate = ends_with(rel, "mlp.gate.weight") || ends_with(rel, "mlp.shared_expert_gate.weight");
      ex.quantized(base, *t, gate ? 8 : opt.bits, gate ? 64 : opt.group_size);
    } else {
      ex.plain(out + rel, *t);  // A_log, dt_bias, the GDN norm: unquantized as mlx keeps them
    }
  }

  fs::create_directories(dst);
  ex.write((fs::path(dst) / "model.safetensors").string());
  std::ifstream cin_(fs::path(src) / "config.json");
  ordered_json cfg = ordered_json::parse(cin_);
  cfg["quantization"] = ex.quantization();
  cfg["quantization_config"] = ex.quantization();
  {
    // closed (and so flushed) before the checkpoint is loaded back below
    std::ofstream cout_(fs::path(dst) / "config.json");
    cout_ << cfg.dump(2) << "\n";
    cout_.close();
    if (!cout_) throw Error("cannot write " + (fs::path(dst) / "config.json").string());
  }
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json",
                        "special_tokens_map.json"})
    if (fs::exists(fs::path(src) / f))
      fs::copy_file(fs::path(src) / f, fs::path(dst) / f, fs::copy_options::overwrite_existing);
  // What was written must load: the same checks as any MLX checkpoint.
  Model::load(dst);
}

}  // namespace lily::quant
