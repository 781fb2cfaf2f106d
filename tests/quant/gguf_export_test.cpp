// Writing GGUF: the block quantizers (each decoded by the reference decoder
// within its format's step, edge cases included), the writer's container
// (read back by Lily's reader), and `lily quantize --gguf` against the files
// llama.cpp's gguf-py wrote for the same fixture: the same tensors, names,
// shapes, conventions and value-head order, byte for byte where the type is
// the same, and the same logits as the checkpoint it came from.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "lily/error.h"
#include "lily/io/gguf.h"
#include "lily/io/gguf_writer.h"
#include "lily/model/qwen35moe.h"
#include "lily/quant/gguf_blocks.h"
#include "lily/quant/gguf_export.h"
#include "lily/quant/gguf_quantize.h"
#include "support/test_support.h"

namespace lily {
namespace {

std::vector<float> roundtrip(GgmlType t, const std::vector<float>& x, int64_t cols) {
  const std::string q = quant::quantize_gguf(t, x.data(), static_cast<int64_t>(x.size()) / cols, cols);
  std::vector<float> y(x.size());
  quant::dequantize_gguf(t, reinterpret_cast<const uint8_t*>(q.data()), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

double rms(const std::vector<float>& a) {
  double s = 0;
  for (float v : a) s += double(v) * v;
  return std::sqrt(s / a.size());
}

double rms_error(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s / a.size());
}

TEST(GgufQuantize, EachTypeDecodesWithinItsStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 0.02f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = normal(rng);
  x[5] = 0.3f;  // an outlier in one block
  // RMS error relative to the data's RMS, from each format's step size.
  const std::vector<std::pair<GgmlType, double>> bounds = {{GgmlType::F16, 1e-3}, {GgmlType::BF16, 5e-3},
                                                           {GgmlType::Q8_0, 0.01}, {GgmlType::Q6_K, 0.04},
                                                           {GgmlType::Q4_0, 0.15}, {GgmlType::Q4_K, 0.12}};
  for (const auto& [t, bound] : bounds) {
    const std::vector<float> y = roundtrip(t, x, 256);
    EXPECT_LT(rms_error(x, y) / rms(x), bound) << ggml_type_name(t);
  }
  // Q8_0 is within half a step of every value (its step is max|x| / 127 in each block, stored
  // as f16: up to 127 steps of its rounding, 2^-11 each, come on top).
  const std::vector<float> y = roundtrip(GgmlType::Q8_0, x, 256);
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    for (int i = 0; i < 32; ++i) EXPECT_LE(std::fabs(x[b + i] - y[b + i]), amax / 127 * 0.57f + 1e-9f);
  }
}

TEST(GgufQuantize, EdgeBlocks) {
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const std::vector<float> zeros(256, 0.0f);
    for (float v : roundtrip(t, zeros, 256)) EXPECT_EQ(v, 0.0f) << ggml_type_name(t);
    // A constant block, all negative, all positive, and one large value among small ones.
    for (float c : {1.5f, -2.25f}) {
      const std::vector<float> same(256, c);
      const std::vector<float> y = roundtrip(t, same, 256);
      for (float v : y) EXPECT_NEAR(v, c, std::fabs(c) * 0.07) << ggml_type_name(t);
    }
    std::vector<float> spike(256, 0.001f);
    spike[100] = -50.0f;
    const std::vector<float> y = roundtrip(t, spike, 256);
    EXPECT_NEAR(y[100], -50.0f, 50.0f * 0.07) << ggml_type_name(t);
  }
  EXPECT_THROW(quant::quantize_gguf(GgmlType::Q4_K, std::vector<float>(64).data(), 1, 64), Error);
  EXPECT_THROW(quant::quantize_gguf(GgmlType::IQ4_XS, std::vector<float>(256).data(), 1, 256), Error);
}

TEST(GgufWriter, WritesWhatTheReaderReads) {
  test::TempDir dir;
  const std::string path = (dir.path() / "w.gguf").string();
  GgufWriter w;
  w.add_string("general.architecture", "qwen35moe");
  w.add_uint32("qwen35moe.block_count", 40);
  w.add_float32("qwen35moe.rope.freq_base", 1e7f);
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_strings("tokenizer.ggml.tokens", {"a", "b", "<|im_end|>"});
  w.add_int32s("tokenizer.ggml.token_type", {1, 1, 3});
  std::vector<float> x(64 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f - 7;
  w.add_tensor("a.weight", GgmlType::Q8_0, {64, 3}, [&] { return quant::quantize_gguf(GgmlType::Q8_0, x.data(), 3, 64); });
  w.add_tensor("b", GgmlType::F32, {5}, [] { return std::string(20, '\0'); });
  w.write(path);
  GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.find("general.architecture")->as_string("k"), "qwen35moe");
  EXPECT_EQ(f.find("qwen35moe.block_count")->as_int("k"), 40);
  EXPECT_EQ(f.find("qwen35moe.rope.freq_base")->as_float("k"), 1e7);
  EXPECT_EQ(f.find("tokenizer.ggml.tokens")->as_array("k")[2].as_string("k"), "<|im_end|>");
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->as_array("k")[2].as_int("k"), 3);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[0].shape, (std::vector<int64_t>{64, 3}));
  std::vector<float> y(x.size());
  quant::dequantize_gguf(GgmlType::Q8_0, f.tensors()[0].data, y.data(), 192);
  EXPECT_LT(rms_error(x, y), 40.75 / 127 / 2);  // within half a Q8_0 step of the largest value
  // A tensor whose producer fails leaves no file behind, and one of the wrong size is named.
  GgufWriter bad;
  bad.add_tensor("c", GgmlType::F32, {4}, [] { return std::string(12, '\0'); });
  const std::string bad_path = (dir.path() / "bad.gguf").string();
  try {
    bad.write(bad_path);
    FAIL() << "a short tensor was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'c' came to 12 bytes, not the 16"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(bad_path));
  EXPECT_FALSE(std::filesystem::exists(bad_path + ".partial"));
}

// The tensors of two GGUF files by name.
std::map<std::string, const GgufTensor*> by_name(const GgufFile& f) {
  std::map<std::string, const GgufTensor*> m;
  for (const GgufTensor& t : f.tensors()) m[t.name] = &t;
  return m;
}

TEST(GgufExport, F32IsGgufPysFileOfTheSameFixture) {
  test::TempDir dir;
  const std::string out = (dir.path() / "tiny-a.gguf").string();
  quant::export_gguf(test::model_dir("tiny-a"), out, {"f32"});
  const GgufFile ours(out), theirs(test::model_dir("tiny-a.gguf"));
  const auto a = by_name(ours), b = by_name(theirs);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : b) {
    ASSERT_TRUE(a.count(name)) << name;
    const GgufTensor& o = *a.at(name);
    EXPECT_EQ(o.type, t->type) << name;
    EXPECT_EQ(o.shape, t->shape) << name;
    ASSERT_EQ(o.nbytes, t->nbytes) << name;
    if (name.find("ssm_a") != std::string::npos) {
      // -exp(A_log): numpy's float32 exp and the C library's may differ in the last place.
      for (size_t i = 0; i < o.nbytes / 4; ++i) {
        int32_t x, y;
        std::memcpy(&x, o.data + 4 * i, 4);
        std::memcpy(&y, t->data + 4 * i, 4);
        EXPECT_LE(std::abs(x - y), 1) << name;
      }
    } else {
      EXPECT_EQ(std::memcmp(o.data, t->data, o.nbytes), 0) << name;
    }
  }
  for (const auto& [key, value] : theirs.metadata()) {
    if (key.rfind("qwen35moe.", 0) != 0 && key.rfind("tokenizer.ggml.", 0) != 0) continue;
    ASSERT_NE(ours.find(key), nullptr) << key;
    if (std::holds_alternative<double>(value.v))
      EXPECT_FLOAT_EQ(ours.find(key)->as_float(key), value.as_float(key)) << key;
    else
      EXPECT_EQ(ours.find(key)->as_int(key), value.as_int(key)) << key;
  }
}

TEST(GgufExport, Q8_0QuantizesAsLlamaCppDoes) {
  test::TempDir dir;
  const std::string out = (dir.path() / "tiny-a-q8_0.gguf").string();
  quant::export_gguf(test::model_dir("tiny-a"), out, {"q8_0"});
  const GgufFile ours(out), theirs(test::model_dir("tiny-a-q8_0.gguf"));
  const auto a = by_name(ours);
  int same_q8 = 0;
  for (const auto& [name, t] : by_name(theirs)) {
    const GgufTensor& o = *a.at(name);
    if (o.type != t->type || t->type != GgmlType::Q8_0) continue;  // the router and the small GDN inputs stay F32 here
    ASSERT_EQ(o.nbytes, t->nbytes) << name;
    EXPECT_EQ(std::memcmp(o.data, t->data, o.nbytes), 0) << name;
    ++same_q8;
  }
  EXPECT_EQ(same_q8, 35);
}

TEST(GgufExport, TheFileGivesTheLogitsOfItsCheckpoint) {
  test::TempDir dir;
  const test::Reference ref = test::load_reference(test::model_dir("tiny-a"));
  auto source = Model::load(test::model_dir("tiny-a"));
  const std::string out = (dir.path() / "f32.gguf").string();
  quant::export_gguf(test::model_dir("tiny-a"), out, {"f32"});
  auto gguf = Model::load(out);
  Qwen35MoeForward a(*gguf), b(*source);
  for (const auto& p : ref.prompts) {
    SequenceState sa = a.new_state(), sb = b.new_state();
    // F32 holds the bf16 weights exactly: only the order of the value heads' sums moves.
    EXPECT_LE(test::max_row_relative_error(a.forward(p.tokens, sa, LogitsFor::AllPositions),
                                           b.forward(p.tokens, sb, LogitsFor::AllPositions), ref.vocab),
              1e-4);
  }
}

// The MTP head goes into the file as llama.cpp's MTP GGUFs carry it (block
// L with nextn.* tensors, block_count L + 1, nextn_predict_layers 1) and
// comes back with the values of the checkpoint's head.
TEST(GgufExport, TheMtpHeadTravelsWithTheFile) {
  test::TempDir dir;
  auto source = Model::load(test::model_dir("tiny-a-mtp"));
  const std::string out = (dir.path() / "mtp.gguf").string();
  quant::export_gguf(test::model_dir("tiny-a-mtp"), out, {"f32"});
  auto gguf = Model::load(out);
  ASSERT_TRUE(gguf->weights().mtp.has_value());
  EXPECT_EQ(gguf->config().num_layers, source->config().num_layers);
  EXPECT_EQ(gguf->gguf()->find("qwen35moe.nextn_predict_layers")->as_int("n"), 1);
  const MtpWeights &a = *gguf->weights().mtp, &b = *source->weights().mtp;
  auto rows = [](const Matrix& m) {
    std::vector<float> v(static_cast<size_t>(m.rows * m.cols));
    for (int64_t r = 0; r < m.rows; ++r) m.row_to_float(r, v.data() + r * m.cols);
    return v;
  };
  auto values = [](const Vector& v) { return std::vector<float>(v.data(), v.data() + v.size()); };
  EXPECT_EQ(rows(a.fc), rows(b.fc));
  EXPECT_EQ(values(a.embed_norm), values(b.embed_norm));
  EXPECT_EQ(values(a.hidden_norm), values(b.hidden_norm));
  EXPECT_EQ(values(a.final_norm), values(b.final_norm));
  EXPECT_EQ(values(a.layer.input_norm), values(b.layer.input_norm));
  EXPECT_EQ(rows(a.layer.attn.q), rows(b.layer.attn.q));
  EXPECT_EQ(rows(a.layer.attn.o), rows(b.layer.attn.o));
  EXPECT_EQ(values(a.layer.attn.k_norm), values(b.layer.attn.k_norm));
  EXPECT_EQ(rows(a.layer.moe.router), rows(b.layer.moe.router));
  for (size_t e = 0; e < b.layer.moe.gate.size(); ++e) {
    EXPECT_EQ(rows(a.layer.moe.gate[e]), rows(b.layer.moe.gate[e]));
    EXPECT_EQ(rows(a.layer.moe.down[e]), rows(b.layer.moe.down[e]));
  }
  EXPECT_EQ(rows(a.layer.moe.shared_expert_gate), rows(b.layer.moe.shared_expert_gate));
  // and speculative decoding runs on it
  Qwen35MoeForward fwd(*gguf);
  fwd.keep_mtp(true);
  SequenceState s = fwd.new_state();
  fwd.forward(test::load_reference(test::model_dir("tiny-a")).prompts[2].tokens, s, LogitsFor::LastPosition,
              ForwardMode::Prompt);
  EXPECT_EQ(fwd.draft(s, 5, 2).size(), 2u);
}

// A file whose head metadata lies: the count of MTP blocks out of range,
// the head block counted as a text layer, no text layer left, or billions. Each is an
// error that names what is wrong, never a model bound to the wrong blocks.
TEST(GgufExport, HostileMtpMetadataIsRefusedByName) {
  test::TempDir dir;
  const std::string good = (dir.path() / "mtp.gguf").string();
  quant::export_gguf(test::model_dir("tiny-a-mtp"), good, {"f32"});
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // a u32 key's value lies after its name and the value type
  auto with = [&](const std::string& key, uint32_t value, const std::string& base) {
    std::string b = base;
    const size_t at = b.find(key);
    if (at == std::string::npos || at + key.size() + 8 > b.size()) {
      ADD_FAILURE() << key << " is not in the file";
      return b;
    }
    uint32_t type = 0;
    std::memcpy(&type, b.data() + at + key.size(), 4);
    EXPECT_EQ(type, 4u) << key << " is not a u32";
    std::memcpy(b.data() + at + key.size() + 4, &value, 4);
    return b;
  };
  auto refused = [&](const std::string& content, const std::string& expected) {
    const std::string path = (dir.path() / "hostile.gguf").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    try {
      Model::load(path);
      ADD_FAILURE() << "loaded; expected an error with '" << expected << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  const auto config = Model::load(test::model_dir("tiny-a-mtp"))->config();
  refused(with("qwen35moe.nextn_predict_layers", 7, bytes), "nextn_predict_layers is 7");
  refused(with("qwen35moe.nextn_predict_layers", 0xFFFFFFFFu, bytes), "nextn_predict_layers is 4294967295");
  // without the head counted apart, its block is a text layer missing the tensors of its kind
  refused(with("qwen35moe.nextn_predict_layers", 0, bytes), "blk." + std::to_string(config.num_layers) + ".");
  refused(with("qwen35moe.block_count", 1, bytes), "'num_hidden_layers' must be a positive integer, got 0");
  refused(with("qwen35moe.block_count", 0x80000005u, bytes), "'num_hidden_layers' is 2147483652");
}

TEST(GgufExport, TheMixFallsBackWhereRowsDoNotSplitIntoItsBlocks) {
  // tiny-a's rows are 64, 32 and 48 wide: no 256-element K-quant block fits,
  // so q4_k_m writes Q8_0 where 32 divides the row and F32 where it does not.
  test::TempDir dir;
  const std::string out = (dir.path() / "q4_k_m.gguf").string();
  quant::export_gguf(test::model_dir("tiny-a"), out, {"q4_k_m"});
  auto m = Model::load(out);
  EXPECT_EQ(m->report().dtype_counts.at("Q8_0"), 35);
  EXPECT_EQ(m->report().dtype_counts.count("Q4_K"), 0u);
  const GgufFile f(out);
  EXPECT_EQ(f.find("general.file_type")->as_int("ftype"), 15);  // llama.cpp's MOSTLY_Q4_K_M
  for (const GgufTensor& t : f.tensors())
    if (t.name.find("ffn_down_shexp") != std::string::npos) {
      EXPECT_EQ(t.type, GgmlType::F32) << t.name;  // rows of 48
    }
}

TEST(GgufExport, RefusesWhatItCannotWrite) {
  test::TempDir dir;
  EXPECT_THROW(quant::export_gguf(test::model_dir("tiny-a"), (dir.path() / "x.gguf").string(), {"q3_k"}), Error);
  try {
    quant::export_gguf(test::model_dir("tiny-a-mlx4"), (dir.path() / "x.gguf").string(), {"q8_0"});
    FAIL() << "an MLX checkpoint was converted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reads Hugging Face checkpoints"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "x.gguf"));
}

}  // namespace
}  // namespace lily
