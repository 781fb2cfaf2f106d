#include "lily/model/config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/quant/affine.h"

namespace lily {

using nlohmann::json;

int64_t ModelConfig::num_layers_of(LayerKind k) const {
  int64_t n = 0;
  for (LayerKind l : layer_kinds) n += (l == k);
  return n;
}

namespace {

class FieldReader {
 public:
  FieldReader(const json& obj, std::string source) : obj_(obj), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw Error(source_ + ": field '" + field + "' " + why);
  }
  bool has(const std::string& f) const { return obj_.contains(f) && !obj_[f].is_null(); }

  int64_t positive_int(const std::string& f) const {
    if (!has(f)) fail(f, "is missing");
    const json& v = obj_[f];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) fail(f, "must be a positive integer, got " + v.dump());
    return v.get<int64_t>();
  }
  int64_t positive_int_or(const std::string& f, int64_t def) const { return has(f) ? positive_int(f) : def; }
  // A count that sizes what is built before any tensor is read (one entry a
  // layer): a hostile file must not ask for billions of them.
  int64_t count_at_most(const std::string& f, int64_t most) const {
    const int64_t v = positive_int(f);
    if (v > most) fail(f, "is " + std::to_string(v) + "; Lily takes at most " + std::to_string(most));
    return v;
  }
  double number_or(const std::string& f, double def) const {
    if (!has(f)) return def;
    if (!obj_[f].is_number()) fail(f, "must be a number, got " + obj_[f].dump());
    return obj_[f].get<double>();
  }
  bool bool_or(const std::string& f, bool def) const {
    if (!has(f)) return def;
    if (!obj_[f].is_boolean()) fail(f, "must be true or false, got " + obj_[f].dump());
    return obj_[f].get<bool>();
  }
  std::string string_or(const std::string& f, const std::string& def) const {
    if (!has(f)) return def;
    if (!obj_[f].is_string()) fail(f, "must be a string, got " + obj_[f].dump());
    return obj_[f].get<std::string>();
  }
  const json& raw(const std::string& f) const { return obj_[f]; }

 private:
  const json& obj_;
  std::string source_;
};

std::vector<int64_t> token_ids(const json& v) {
  std::vector<int64_t> ids;
  if (v.is_number_integer()) ids.push_back(v.get<int64_t>());
  if (v.is_array())
    for (const auto& x : v)
      if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
  return ids;
}

}  // namespace

QuantizationConfig::Override QuantizationConfig::for_module(const std::string& path) const {
  auto it = overrides.find(path);
  return it == overrides.end() ? Override{bits, group_size} : it->second;
}

namespace {
QuantizationConfig parse_quantization(const json& q, const std::string& source) {
  QuantizationConfig out;
  FieldReader r(q, source + " quantization");
  auto check = [&](int bits, int gs, const std::string& where) {
    if (!quant::supported_bits(bits))
      r.fail(where, "has bits " + std::to_string(bits) + ", which Lily does not support (2, 3, 4, 5, 6 or 8)");
    if (!quant::supported_group_size(gs))
      r.fail(where, "has group_size " + std::to_string(gs) + ", which Lily does not support (32, 64 or 128)");
  };
  const std::string mode = r.string_or("mode", "affine");
  if (mode != "affine") r.fail("mode", "is '" + mode + "'; only MLX affine quantization is supported");
  out.bits = static_cast<int>(r.positive_int("bits"));
  out.group_size = static_cast<int>(r.positive_int_or("group_size", 64));
  check(out.bits, out.group_size, "bits");
  for (auto it = q.begin(); it != q.end(); ++it) {
    if (!it.value().is_object()) continue;
    FieldReader o(it.value(), source + " quantization." + it.key());
    const int bits = static_cast<int>(o.positive_int_or("bits", out.bits));
    const int gs = static_cast<int>(o.positive_int_or("group_size", out.group_size));
    check(bits, gs, it.key());
    out.overrides[it.key()] = {bits, gs};
  }
  return out;
}
}  // namespace

namespace {
ModelConfig config_from_json(const json& root, const std::string& source);
}  // namespace

ModelConfig ModelConfig::parse(const std::string& text, const std::string& source) {
  const json root = parse_json(text, source);
  if (!root.is_object()) throw Error(source + ": not a JSON object");
  try {
    return config_from_json(root, source);
  } catch (const json::exception& e) {  // a field of the wrong type
    throw Error(source + ": unexpected content: " + e.what());
  }
}

namespace {
ModelConfig config_from_json(const json& root, const std::string& source) {
  ModelConfig c;
  c.model_type = root.value("model_type", std::string());
  const json* text_cfg = &root;
  if (c.model_type == "qwen3_5_moe") {
    if (!root.contains("text_config") || !root["text_config"].is_object())
      throw Error(source + ": model_type qwen3_5_moe needs a text_config object");
    text_cfg = &root["text_config"];
  } else if (c.model_type != "qwen3_5_moe_text") {
    throw Error(source + ": unsupported model_type '" + c.model_type +
                "': Lily runs Qwen3.5/3.6 MoE checkpoints (model_type qwen3_5_moe or qwen3_5_moe_text)");
  }
  FieldReader r(*text_cfg, c.model_type == "qwen3_5_moe" ? source + " text_config" : source);

  c.vocab_size = r.positive_int("vocab_size");
  c.hidden_size = r.positive_int("hidden_size");
  c.num_layers = r.count_at_most("num_hidden_layers", ModelConfig::kMaxLayers);
  c.rms_norm_eps = r.number_or("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", "must be positive");
  c.tie_word_embeddings = r.bool_or("tie_word_embeddings", root.value("tie_word_embeddings", false));
  c.max_position_embeddings = r.positive_int_or("max_position_embeddings", 262144);

  if (r.has("layer_types")) {
    const json& lt = r.raw("layer_types");
    if (!lt.is_array()) r.fail("layer_types", "must be a list");
    for (const auto& s : lt) {
      if (s == "linear_attention") c.layer_kinds.push_back(LayerKind::LinearAttention);
      else if (s == "full_attention") c.layer_kinds.push_back(LayerKind::FullAttention);
      else r.fail("layer_types", "has unknown entry " + s.dump());
    }
    if (static_cast<int64_t>(c.layer_kinds.size()) != c.num_layers)
      r.fail("layer_types", "has " + std::to_string(c.layer_kinds.size()) + " entries for " +
                                std::to_string(c.num_layers) + " layers");
  } else {
    const int64_t interval = r.positive_int_or("full_attention_interval", 4);
    for (int64_t i = 0; i < c.num_layers; ++i)
      c.layer_kinds.push_back((i + 1) % interval == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
  }

  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") r.fail("hidden_act", "must be silu, got '" + act + "'");
  if (r.bool_or("attention_bias", false)) r.fail("attention_bias", "must be false: this architecture has no biases");
  if (!r.bool_or("attn_output_gate", true)) r.fail("attn_output_gate", "must be true: the attention output is gated");

  c.num_heads = r.positive_int("num_attention_heads");
  c.num_kv_heads = r.positive_int("num_key_value_heads");
  c.head_dim = r.positive_int_or("head_dim", c.hidden_size / c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    r.fail("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(c.num_heads) + ")");

  double partial = r.number_or("partial_rotary_factor", 1.0);
  double theta = r.number_or("rope_theta", 10000.0);
  if (r.has("rope_parameters")) {
    const json& rp = r.raw("rope_parameters");
    if (!rp.is_object()) r.fail("rope_parameters", "must be an object");
    FieldReader rr(rp, source + " rope_parameters");
    partial = rr.number_or("partial_rotary_factor", partial);
    theta = rr.number_or("rope_theta", theta);
    const std::string type = rr.string_or("rope_type", "default");
    if (type != "default") rr.fail("rope_type", "must be 'default', got '" + type + "'");
  }
  if (!(partial > 0 && partial <= 1)) r.fail("partial_rotary_factor", "must be in (0, 1]");
  if (!(theta > 0)) r.fail("rope_theta", "must be positive");
  c.rope_theta = theta;
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0)
    r.fail("partial_rotary_factor", "gives a rotary dimension of " + std::to_string(c.rotary_dim) + ", which must be even and positive");

  c.linear_num_key_heads = r.positive_int("linear_num_key_heads");
  c.linear_num_value_heads = r.positive_int("linear_num_value_heads");
  c.linear_key_head_dim = r.positive_int("linear_key_head_dim");
  c.linear_value_head_dim = r.positive_int("linear_value_head_dim");
  c.linear_conv_kernel = r.positive_int("linear_conv_kernel_dim");
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
    r.fail("linear_num_value_heads", "must be a multiple of linear_num_key_heads (" + std::to_string(c.linear_num_key_heads) + ")");

  c.num_experts = r.positive_int("num_experts");
  c.experts_per_token = r.positive_int("num_experts_per_tok");
  if (c.experts_per_token > c.num_experts) r.fail("num_experts_per_tok", "exceeds num_experts");
  c.moe_intermediate_size = r.positive_int("moe_intermediate_size");
  c.shared_expert_intermediate_size = r.positive_int("shared_expert_intermediate_size");

  if (root.contains("quantization") && root["quantization"].is_object())
    c.quantization = parse_quantization(root["quantization"], source);

  c.eos_token_ids = token_ids(r.has("eos_token_id") ? r.raw("eos_token_id") : root.value("eos_token_id", json()));
  const auto bos = token_ids(r.has("bos_token_id") ? r.raw("bos_token_id") : root.value("bos_token_id", json()));
  if (!bos.empty()) c.bos_token_id = bos[0];
  return c;
}
}  // namespace

ModelConfig ModelConfig::load(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) throw Error("cannot read the model directory " + dir + ": " + ec.message());
  if (!fs::exists(st)) throw Error(dir + ": no such directory");
  if (!fs::is_directory(st)) throw Error(dir + " is not a directory (a model is a directory with config.json)");
  if (::access(dir.c_str(), R_OK | X_OK) != 0)
    throw Error("cannot read the model directory " + dir + ": " + std::strerror(errno));
  const std::string path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(fs::symlink_status(path, ec)))
    throw Error(dir + ": no config.json (is this a model directory?)");
  return parse(read_regular_file(path, kMaxConfigBytes), path);
}

}  // namespace lily
