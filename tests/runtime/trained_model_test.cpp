// The bundled model (models/lily-tiny) was trained by tools/train_tiny.py to
// do arithmetic, small text tasks and weather tool calls, thinking first or
// not. These tests put held-out examples (drawn from a seed the training never
// used, prompts it never saw) through what a user runs: Lily's chat template,
// greedy generation and the output parser; they hold Lily's greedy tokens to
// transformers' on the same weights, and the lossy paths (MLX 8- and 4-bit
// checkpoints made by `lily quantize`, products of int8 inputs, the GPU) to
// the answers of the stored weights.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "lily/backend/backend_factory.h"
#include "lily/backend/cpu/cpu_backend.h"
#include "lily/quant/mlx_export.h"
#include "lily/runtime/generator.h"
#include "lily/text/output_parser.h"
#include "support/test_support.h"

namespace lily {
namespace {

using nlohmann::ordered_json;

struct Example {
  std::string family, prompt, answer;
  ordered_json messages, tools, expect;
  bool thinking = false;
};

std::string trained_data(const std::string& file) { return test::data_dir() + "/trained/" + file; }

std::vector<Example> heldout() {
  std::ifstream in(trained_data("heldout.jsonl"));
  std::vector<Example> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const ordered_json j = ordered_json::parse(line);
    out.push_back({j["family"], j["prompt"], j["answer"], j["messages"], j["tools"], j["expect"], j["thinking"]});
  }
  return out;
}

// The first `n` examples of each family, in the file's order.
std::vector<Example> first_of_each_family(const std::vector<Example>& all, size_t n) {
  std::map<std::string, size_t> taken;
  std::vector<Example> out;
  for (const Example& e : all)
    if (taken[e.family]++ < n) out.push_back(e);
  return out;
}

struct Answer {
  std::string prompt_text;  // the prompt as Lily's template rendered it
  std::string raw;          // the generated text, up to the end of the turn
  ParsedDelta parsed;
};

Answer answer(const Engine& engine, const Example& e) {
  ChatRequest req;
  req.messages = e.messages;
  req.tools = e.tools;
  req.kwargs["enable_thinking"] = e.thinking;
  Answer a;
  GenerationRequest g;
  g.prompt = engine.chat_prompt(req, &a.prompt_text);
  g.sampling = engine.default_sampling();
  g.sampling.temperature = 0;
  g.max_tokens = 96;
  Session session(engine.model());
  a.raw = generate(engine, session, g, [](const std::string&) { return true; }).text;
  OutputParser parser(e.thinking, e.tools);
  a.parsed = parser.push(a.raw);
  a.parsed.append(parser.finish());
  return a;
}

// Whether an answer is what the example asks for: the text the model was
// taught, word for word, and what an API client reads from it (the reasoning
// present exactly when thinking is on, the call and its arguments, or none).
bool correct(const Example& e, const Answer& a) {
  const std::string end = "<|im_end|>";
  const std::string want = e.answer.substr(0, e.answer.size() - end.size());
  if (a.raw != want) return false;
  if (a.parsed.reasoning.empty() == e.thinking) return false;
  const bool wants_call = e.family == "tool" && e.expect.is_object() && !e.expect["call"].is_null();
  if (!wants_call) return a.parsed.tool_calls.empty();
  return a.parsed.tool_calls.size() == 1 && a.parsed.tool_calls[0].name == e.expect["call"].get<std::string>() &&
         a.parsed.tool_calls[0].arguments == e.expect["arguments"];
}

class TrainedModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = Engine::load(test::tiny_model_dir()).release(); }
  static void TearDownTestSuite() { delete engine_; }
  static Engine* engine_;
};
Engine* TrainedModel::engine_ = nullptr;

TEST_F(TrainedModel, AnswersHeldOutExamplesOfEveryFamily) {
  const std::vector<Example> examples = heldout();
  ASSERT_GE(examples.size(), 300u);
  std::map<std::string, std::pair<int, int>> score;  // family -> (right, asked)
  int shown = 0;
  for (const Example& e : examples) {
    const Answer a = answer(*engine_, e);
    // the template renders what the trainer's Jinja rendered
    ASSERT_EQ(a.prompt_text, e.prompt);
    const bool ok = correct(e, a);
    score[e.family].first += ok;
    score[e.family].second += 1;
    if (!ok && shown++ < 8) std::cout << "miss: " << ordered_json(e.messages).dump() << "\n  got " << ordered_json(a.raw) << "\n";
  }
  for (const auto& [family, s] : score) {
    const double accuracy = static_cast<double>(s.first) / s.second;
    std::cout << family << ": " << s.first << " / " << s.second << " = " << accuracy << "\n";
    EXPECT_GE(accuracy, 0.95) << family;
  }
  EXPECT_EQ(score.size(), 3u);
}

TEST_F(TrainedModel, GreedyTokensAreTransformersOnTheSameWeights) {
  const ordered_json ref = ordered_json::parse(test::read_file(trained_data("reference.json")));
  ASSERT_GE(ref["prompts"].size(), 8u);
  for (const auto& p : ref["prompts"]) {
    GenerationRequest g;
    g.prompt = p["tokens"].get<std::vector<int32_t>>();
    const auto want = p["greedy"].get<std::vector<int32_t>>();
    g.sampling = engine_->default_sampling();
    g.sampling.temperature = 0;
    g.max_tokens = static_cast<int64_t>(want.size());
    Session session(engine_->model());
    const GenerationResult got = generate(*engine_, session, g, [](const std::string&) { return true; });
    EXPECT_EQ(got.tokens, want) << p["prompt"].get<std::string>();
  }
}

// The same examples through a lossy path give the stored weights' answers.
void expect_same_answers(const Engine& lossy, const Engine& exact, const std::vector<Example>& examples,
                         const std::string& what) {
  int same = 0;
  for (const Example& e : examples) {
    const std::string got = answer(lossy, e).raw, want = answer(exact, e).raw;
    same += got == want;
    EXPECT_EQ(got, want) << what << ": " << ordered_json(e.messages).dump();
  }
  std::cout << what << ": " << same << " / " << examples.size() << " answers the same\n";
}

TEST_F(TrainedModel, QuantizedCheckpointsGiveTheSameAnswers) {
  const std::vector<Example> examples = first_of_each_family(heldout(), 20);
  for (int bits : {8, 4}) {
    test::TempDir d;
    // the trainer takes any hidden size of whole 32-wide groups (--hidden), not always of 64-wide ones
    quant::export_mlx(test::tiny_model_dir(), d.str(), {bits, 32});
    for (bool int8 : {false, true}) {
      if (int8 && !cpu::has_int8_kernels(cpu::best_isa())) continue;
      auto backend = std::make_shared<cpu::CpuBackend>(test::cpu_context(cpu::best_isa(), int8));
      const auto engine = Engine::load(d.str(), backend);
      expect_same_answers(*engine, *engine_, examples,
                          "MLX " + std::to_string(bits) + "-bit" + (int8 ? ", int8 inputs" : ", float inputs"));
    }
  }
}

// The GPU, with bf16 and with fp32 activations, gives the CPU's answers.
TEST_F(TrainedModel, GpuGivesTheSameAnswers) {
  std::string why;
  if (!device_available(Device::Cuda, &why)) GTEST_SKIP() << "no GPU backend here: " << why;
  const std::vector<Example> examples = first_of_each_family(heldout(), 20);
  for (bool f32 : {true, false}) {
    BackendOptions o;
    o.float_activations = f32;
    const auto engine = Engine::load(test::tiny_model_dir(), make_backend(Device::Cuda, o));
    expect_same_answers(*engine, *engine_, examples, f32 ? "GPU, fp32 activations" : "GPU, bf16 activations");
  }
}

}  // namespace
}  // namespace lily
