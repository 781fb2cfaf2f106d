// Loading checks every tensor before anything is computed; each bad input gets
// an error naming the tensor and what was expected.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "lily/error.h"
#include "lily/io/safetensors.h"
#include "lily/io/safetensors_writer.h"
#include "lily/model/model.h"
#include "support/test_support.h"

namespace lily {
namespace {

namespace fs = std::filesystem;

// Rewrites fixture `name` into `dst`; `edit` may change or drop (return false) each tensor.
using Edit = std::function<bool(const std::string& name, DType& dtype, std::vector<int64_t>& shape, std::string& bytes)>;
void rewrite_fixture(const std::string& name, const std::string& dst, const Edit& edit) {
  const std::string src = test::model_dir(name);
  fs::copy_file(src + "/config.json", dst + "/config.json");
  auto archive = SafetensorsArchive::open_dir(src);
  SafetensorsWriter w;
  for (const auto& [n, t] : archive->tensors()) {
    DType dtype = t->dtype;
    std::vector<int64_t> shape = t->shape;
    std::string bytes(static_cast<const char*>(t->data), t->nbytes);
    if (edit(n, dtype, shape, bytes)) w.add(n, dtype, shape, bytes.data(), bytes.size());
  }
  w.write(dst + "/model.safetensors");
}

std::string load_error(const std::string& dir) {
  try {
    Model::load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Binding, LoadsBothLayouts) {
  auto text = Model::load(test::model_dir("tiny-a"));
  EXPECT_EQ(text->report().layout, CheckpointLayout::HfTextModel);
  EXPECT_FALSE(text->report().fused_experts);
  EXPECT_TRUE(text->report().skipped_groups.empty());
  auto release = Model::load(test::model_dir("tiny-a-release"));
  EXPECT_EQ(release->report().layout, CheckpointLayout::HfRelease);
  EXPECT_TRUE(release->report().fused_experts);
  EXPECT_EQ(release->report().skipped_groups.at("model.visual"), 3);
  EXPECT_EQ(release->report().skipped_groups.at("mtp"), 2);
  EXPECT_EQ(text->report().parameters, release->report().parameters);
}

TEST(Binding, NormalisesConventions) {
  auto m = Model::load(test::model_dir("tiny-a"));
  auto archive = SafetensorsArchive::open_dir(test::model_dir("tiny-a"));
  // (1 + w) norms become plain multipliers; A_log becomes -exp(A_log).
  const TensorView* n = archive->find("model.norm.weight");
  std::vector<float> raw(64);
  convert_to_float(n->dtype, n->data, raw.data(), 64);
  EXPECT_FLOAT_EQ(m->weights().final_norm[5], 1.0f + raw[5]);
  const TensorView* a = archive->find("model.layers.0.linear_attn.A_log");
  EXPECT_FLOAT_EQ(m->weights().layers[0].gdn.neg_exp_a[1], -std::exp(static_cast<const float*>(a->data)[1]));
  // the GDN norm keeps its plain weight
  const TensorView* g = archive->find("model.layers.0.linear_attn.norm.weight");
  EXPECT_FLOAT_EQ(m->weights().layers[0].gdn.norm[3], static_cast<const float*>(g->data)[3]);
}

TEST(Binding, MissingTensor) {
  test::TempDir d;
  rewrite_fixture("tiny-a", d.str(), [](const std::string& n, auto&, auto&, auto&) {
    return n != "model.layers.3.self_attn.k_norm.weight";
  });
  EXPECT_NE(load_error(d.str()).find("missing tensor 'model.layers.3.self_attn.k_norm.weight'"), std::string::npos)
      << load_error(d.str());
}

TEST(Binding, MissingExpert) {
  test::TempDir d;
  rewrite_fixture("tiny-a", d.str(), [](const std::string& n, auto&, auto&, auto&) {
    return n != "model.layers.1.mlp.experts.5.up_proj.weight";
  });
  EXPECT_NE(load_error(d.str()).find("'model.layers.1.mlp.experts.5.up_proj.weight'"), std::string::npos);
}

TEST(Binding, WrongShape) {
  test::TempDir d;
  rewrite_fixture("tiny-a", d.str(), [](const std::string& n, auto&, std::vector<int64_t>& shape, auto&) {
    if (n == "model.layers.0.linear_attn.in_proj_z.weight") shape = {32, 128};  // same bytes, wrong shape
    return true;
  });
  EXPECT_NE(load_error(d.str()).find("tensor 'model.layers.0.linear_attn.in_proj_z.weight' has shape [32, 128], "
                                     "expected [64, 64]"),
            std::string::npos)
      << load_error(d.str());
}

// A head that does not bind leaves the text model as it is without the
// head, and says why: the same report, the same weights, no speculation.
TEST(Binding, AnMtpHeadThatDoesNotBindLeavesTheTextModel) {
  test::TempDir d;
  rewrite_fixture("tiny-a-mtp", d.str(), [](const std::string& n, auto&, std::vector<int64_t>& shape, auto&) {
    if (n == "mtp.layers.0.self_attn.o_proj.weight") std::swap(shape[0], shape[1]);
    return true;
  });
  auto broken = Model::load(d.str());
  auto text_only = Model::load(test::model_dir("tiny-a"));  // tiny-a-mtp is its weights and a head
  EXPECT_FALSE(broken->weights().mtp.has_value());
  EXPECT_NE(broken->report().mtp_note.find("tensor 'mtp.layers.0.self_attn.o_proj.weight' has shape"), std::string::npos)
      << broken->report().mtp_note;
  EXPECT_EQ(broken->report().skipped_groups.at("mtp"), 19);  // every head tensor, none half-bound
  EXPECT_EQ(broken->report().parameters, text_only->report().parameters);
  EXPECT_EQ(broken->report().weight_bytes, text_only->report().weight_bytes);
}

TEST(Binding, WrongDtype) {
  test::TempDir d;
  rewrite_fixture("tiny-a", d.str(), [](const std::string& n, DType& dtype, auto&, auto&) {
    if (n == "lm_head.weight") dtype = DType::I16;  // same element size
    return true;
  });
  EXPECT_NE(load_error(d.str()).find("tensor 'lm_head.weight' has dtype I16"), std::string::npos)
      << load_error(d.str());
}

TEST(Binding, ConfigThatDisagreesWithTheTensors) {
  test::TempDir d;
  rewrite_fixture("tiny-a", d.str(), [](auto&, auto&, auto&, auto&) { return true; });
  std::string cfg = test::read_file(d.str() + "/config.json");
  const std::string from = "\"moe_intermediate_size\": 32", to = "\"moe_intermediate_size\": 16";
  ASSERT_NE(cfg.find(from), std::string::npos);
  cfg.replace(cfg.find(from), from.size(), to);
  test::write_file(d.str() + "/config.json", cfg);
  EXPECT_NE(load_error(d.str()).find("has shape [32, 64], expected [16, 64]"), std::string::npos)
      << load_error(d.str());
}

TEST(Binding, TruncatedCheckpoint) {
  test::TempDir d;
  rewrite_fixture("tiny-c", d.str(), [](auto&, auto&, auto&, auto&) { return true; });
  const std::string p = d.str() + "/model.safetensors";
  fs::resize_file(p, fs::file_size(p) / 2);
  EXPECT_NE(load_error(d.str()).find("truncated safetensors file"), std::string::npos) << load_error(d.str());
}

TEST(Binding, NotACheckpoint) {
  test::TempDir d;
  rewrite_fixture("tiny-c", d.str(), [](const std::string& n, auto&, auto&, auto&) {
    return n.rfind("model.embed_tokens", 0) != 0;
  });
  EXPECT_NE(load_error(d.str()).find("embed_tokens"), std::string::npos);
}

}  // namespace
}  // namespace lily
