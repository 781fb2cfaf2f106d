// MLX-layout quantized checkpoints, from `lily quantize` and from the
// independent writer tools/mlx_quantize.py: they load zero-copy, compute the
// same logits as their own weights dequantized to float32, and the two
// writers produce the same bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lily/error.h"
#include "lily/io/safetensors.h"
#include "lily/io/safetensors_writer.h"
#include "lily/model/qwen35moe.h"
#include "lily/quant/affine.h"
#include "lily/quant/mlx_export.h"
#include "lily/runtime/greedy.h"
#include "support/test_support.h"

namespace lily {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// The same checkpoint with every quantized weight replaced by its float32
// dequantization: the reference a quantized run must reproduce.
void write_dequantized(const std::string& src, const std::string& dst) {
  fs::create_directories(dst);
  auto archive = SafetensorsArchive::open_dir(src);
  ordered_json cfg = ordered_json::parse(test::read_file(src + "/config.json"));
  const ordered_json qcfg = cfg["quantization"];
  cfg.erase("quantization");
  cfg.erase("quantization_config");
  test::write_file(dst + "/config.json", cfg.dump(2));
  SafetensorsWriter w;
  for (const auto& [name, t] : archive->tensors()) {
    const bool side = name.size() > 7 && (name.substr(name.size() - 7) == ".scales" || name.substr(name.size() - 7) == ".biases");
    if (side) continue;
    const std::string base = name.substr(0, name.size() - 7);
    const TensorView* scales = archive->find(base + ".scales");
    if (scales == nullptr || name.substr(name.size() - 7) != ".weight") {
      w.add(name, t->dtype, t->shape, t->data, t->nbytes);
      continue;
    }
    const int bits = qcfg.contains(base) ? qcfg[base]["bits"].get<int>() : qcfg["bits"].get<int>();
    const int gs = qcfg.contains(base) ? qcfg[base]["group_size"].get<int>() : qcfg["group_size"].get<int>();
    std::vector<int64_t> shape = t->shape;
    shape.back() = shape.back() * 32 / bits;
    const int64_t cols = shape.back(), rows = t->numel() * 32 / bits / cols;
    std::vector<float> out(static_cast<size_t>(rows * cols));
    const size_t srow = static_cast<size_t>(cols / gs) * dtype_size(scales->dtype);
    for (int64_t r = 0; r < rows; ++r)
      quant::dequantize_row(static_cast<const uint8_t*>(t->data) + r * quant::packed_row_bytes(cols, bits),
                            static_cast<const uint8_t*>(scales->data) + r * srow,
                            static_cast<const uint8_t*>(archive->find(base + ".biases")->data) + r * srow, scales->dtype,
                            cols, bits, gs, out.data() + r * cols);
    w.add(name, DType::F32, shape, out.data(), out.size() * 4);
  }
  w.write(dst + "/model.safetensors");
}

void expect_matches_dequantized(const std::string& dir) {
  test::TempDir d;
  write_dequantized(dir, d.str());
  auto q = Model::load(dir);
  auto f = Model::load(d.str());
  ASSERT_EQ(q->report().layout, CheckpointLayout::Mlx);
  EXPECT_TRUE(q->report().quantized);
  EXPECT_FALSE(f->report().quantized);
  EXPECT_LT(q->report().weight_bytes, f->report().weight_bytes);
  const auto ref = test::load_reference(test::model_dir("tiny-a"));
  for (size_t k : {2, 5}) {  // 63 and 130 tokens
    const auto& toks = ref.prompts[k].tokens;
    Qwen35MoeForward fq(*q), ff(*f);
    SequenceState sq = fq.new_state(), sf = ff.new_state();
    const auto lq = fq.forward(toks, sq, LogitsFor::AllPositions);
    const auto lf = ff.forward(toks, sf, LogitsFor::AllPositions);
    EXPECT_LE(test::max_row_relative_error(lq, lf, ref.vocab), 1e-4) << dir << " prompt " << k;
    SequenceState gq = fq.new_state(), gf = ff.new_state();
    GreedyOptions opt;
    opt.max_tokens = 8;
    EXPECT_EQ(generate_greedy(fq, gq, toks, opt), generate_greedy(ff, gf, toks, opt)) << dir;
  }
}

std::string tensors_digest(const std::string& dir) {
  auto a = SafetensorsArchive::open_dir(dir);
  std::string s;
  for (const auto& [name, t] : a->tensors())
    s += name + std::string(dtype_name(t->dtype)) + t->shape_string() + std::string(static_cast<const char*>(t->data), t->nbytes);
  return s;
}

TEST(MlxCheckpoint, IndependentWriterOutputsMatchTheirDequantization) {
  for (const char* n : {"tiny-a-mlx4", "tiny-a-mlx6", "tiny-a-mlx8", "tiny-a-mlx3-g32"})
    expect_matches_dequantized(test::model_dir(n));
}

TEST(MlxCheckpoint, LilyQuantizeEqualsTheIndependentWriter) {
  struct Case {
    const char* fixture;
    int bits, gs;
  };
  for (const Case c : {Case{"tiny-a-mlx4", 4, 64}, Case{"tiny-a-mlx6", 6, 64}, Case{"tiny-a-mlx8", 8, 64},
                       Case{"tiny-a-mlx3-g32", 3, 32}}) {
    test::TempDir d;
    quant::export_mlx(test::model_dir("tiny-a"), d.str() + "/q", {c.bits, c.gs});
    EXPECT_EQ(tensors_digest(d.str() + "/q"), tensors_digest(test::model_dir(c.fixture))) << c.fixture;
    EXPECT_EQ(ordered_json::parse(test::read_file(d.str() + "/q/config.json"))["quantization"],
              ordered_json::parse(test::read_file(test::model_dir(c.fixture) + "/config.json"))["quantization"]);
  }
}

TEST(MlxCheckpoint, EveryBitWidthAndGroupSizeFromLilyQuantize) {
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int gs : {32, 64}) {
      test::TempDir d;
      quant::export_mlx(test::model_dir("tiny-a"), d.str() + "/q", {bits, gs});
      expect_matches_dequantized(d.str() + "/q");
    }
}

TEST(MlxCheckpoint, ReleaseLayoutQuantizesToTheSameCheckpoint) {
  test::TempDir d;
  quant::export_mlx(test::model_dir("tiny-a-release"), d.str() + "/q", {4, 64});
  EXPECT_EQ(tensors_digest(d.str() + "/q"), tensors_digest(test::model_dir("tiny-a-mlx4")));
}

// Rewrites a quantized fixture with one tensor changed or dropped.
std::string load_error_after(const std::string& fixture, const std::function<bool(const std::string&, TensorView&)>& edit,
                             const std::function<void(ordered_json&)>& edit_config = nullptr) {
  test::TempDir d;
  auto archive = SafetensorsArchive::open_dir(test::model_dir(fixture));
  SafetensorsWriter w;
  for (const auto& [name, t] : archive->tensors()) {
    TensorView v = *t;
    if (edit(name, v)) w.add(name, v.dtype, v.shape, v.data, v.nbytes);
  }
  w.write(d.str() + "/model.safetensors");
  ordered_json cfg = ordered_json::parse(test::read_file(test::model_dir(fixture) + "/config.json"));
  if (edit_config) edit_config(cfg);
  test::write_file(d.str() + "/config.json", cfg.dump());
  try {
    Model::load(d.str());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MlxCheckpoint, BadQuantizedInputGetsClearErrors) {
  const std::string qkv = "language_model.model.layers.0.linear_attn.in_proj_qkv";
  std::string e = load_error_after("tiny-a-mlx4", [&](const std::string& n, TensorView& v) {
    if (n == qkv + ".weight") v.shape = {256, 4}, v.nbytes = 256 * 4 * 4;  // wrong packed width
    return true;
  });
  EXPECT_NE(e.find("expected [128, 8] for 4-bit packing of 64 columns"), std::string::npos) << e;
  e = load_error_after("tiny-a-mlx4", [&](const std::string& n, TensorView&) { return n != qkv + ".scales"; });
  EXPECT_NE(e.find(qkv + ".weight' has dtype U32"), std::string::npos) << e;
  e = load_error_after("tiny-a-mlx4", [&](const std::string& n, TensorView&) { return n != qkv + ".biases"; });
  EXPECT_NE(e.find("missing tensor '" + qkv + ".biases'"), std::string::npos) << e;
  e = load_error_after("tiny-a-mlx4", [](auto&, auto&) { return true; }, [](ordered_json& c) { c["quantization"]["bits"] = 7; });
  EXPECT_NE(e.find("bits 7, which Lily does not support"), std::string::npos) << e;
  e = load_error_after("tiny-a-mlx4", [](auto&, auto&) { return true; },
                       [](ordered_json& c) { c["quantization"]["mode"] = "mxfp4"; });
  EXPECT_NE(e.find("only MLX affine quantization"), std::string::npos) << e;
  e = load_error_after("tiny-a-mlx4", [](auto&, auto&) { return true; }, [](ordered_json& c) { c.erase("quantization"); });
  EXPECT_NE(e.find("no quantization block"), std::string::npos) << e;

  test::TempDir d;
  EXPECT_THROW(quant::export_mlx(test::model_dir("tiny-a"), d.str() + "/x", {7, 64}), Error);
  EXPECT_THROW(quant::export_mlx(test::model_dir("tiny-a"), d.str() + "/x", {4, 48}), Error);
  EXPECT_THROW(quant::export_mlx(test::model_dir("tiny-a-mlx4"), d.str() + "/x", {4, 64}), Error);
}

}  // namespace
}  // namespace lily
