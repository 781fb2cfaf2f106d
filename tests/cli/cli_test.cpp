// The checking commands as other tools use them: through the binary.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace lily {
namespace {

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

std::vector<float> floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

TEST(Cli, LogitsWritesEveryPositionInBothModes) {
  const auto ref = test::load_reference(test::model_dir("tiny-b"));
  const auto& p = ref.prompts[4];  // 65 tokens: across the chunk boundary
  test::TempDir d;
  for (const std::string mode : {"", " --decode", " --chunk 7"}) {
    const auto r = test::run_lily("logits --model " + test::model_dir("tiny-b-release") + " --tokens " +
                                  join(p.tokens) + " --out " + d.str() + "/l.f32" + mode);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto got = floats(test::read_file(d.str() + "/l.f32"));
    ASSERT_EQ(got.size(), p.tokens.size() * ref.vocab) << mode;
    EXPECT_LE(test::max_row_relative_error(got, p.logits, ref.vocab), 1e-4) << mode;
  }
}

TEST(Cli, GeneratePrintsAJsonList) {
  const auto ref = test::load_reference(test::model_dir("tiny-c"));
  const auto& p = ref.prompts[2];
  const auto r = test::run_lily("generate --model " + test::model_dir("tiny-c") + " --tokens " + join(p.tokens) +
                                " --max-tokens " + std::to_string(p.greedy.size()) + " --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).get<std::vector<int32_t>>(), p.greedy);
}

TEST(Cli, GenerateStopsAtEos) {
  // the model's eos id is 2; with a prompt whose greedy path reaches it the list ends there
  const auto ref = test::load_reference(test::model_dir("tiny-b"));
  for (const auto& p : ref.prompts) {
    const auto r = test::run_lily("generate --model " + test::model_dir("tiny-b") + " --tokens " + join(p.tokens) +
                                  " --max-tokens " + std::to_string(p.greedy.size()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto ids = nlohmann::json::parse(r.out).get<std::vector<int32_t>>();
    const auto eos = std::find(p.greedy.begin(), p.greedy.end(), 2);
    const std::vector<int32_t> want(p.greedy.begin(), eos == p.greedy.end() ? eos : eos + 1);
    EXPECT_EQ(ids, want);
  }
}

TEST(Cli, InfoDescribesTheCheckpoint) {
  const auto r = test::run_lily("info --model " + test::model_dir("tiny-a-release"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle : {"hf-release", "4 (3 Gated DeltaNet, 1 full attention)", "8 experts, top 2",
                             "skipped:      model.visual.* (3 tensors)", "mtp.* (2 tensors)", "BF16", "F32",
                             "parameters:   362440"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(Cli, InfoDescribesAGgufFile) {
  const auto r = test::run_lily("info --model " + test::model_dir("tiny-a-q8_0.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle : {"gguf (llama.cpp qwen35moe", "Q8_0 x45 (", "F32 x31 (", "gguf:         version 3, 1 file",
                             "general.architecture = qwen35moe", "tokenizer:    none in the file"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(Cli, InfoAndBenchSpeakOfTheMtpHead) {
  const auto info = test::run_lily("info --model " + test::model_dir("tiny-a-mtp"));
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("mtp head:     present"), std::string::npos) << info.out;
  const auto partial = test::run_lily("info --model " + test::model_dir("tiny-a-release"));
  EXPECT_NE(partial.out.find("mtp head:     not used: missing tensor 'mtp."), std::string::npos) << partial.out;
  // one configuration of bench decodes the same tokens with and without drafts
  const std::string args = "bench --model " + test::model_dir("tiny-a-mtp") + " --decode-steps 12 --mtp 2";
  const auto child = test::run_lily(args + " --child 24");
  ASSERT_EQ(child.exit_code, 0) << child.err;
  const auto r = nlohmann::json::parse(child.out);
  EXPECT_EQ(r["mtp"]["token_digest"], r["decode"]["token_digest"]) << child.out;
  EXPECT_EQ(r["mtp"]["tokens"], 12) << child.out;
  EXPECT_EQ(r["mtp"]["drafts"], 2) << child.out;
  // the whole command starts a process of itself per context, which an emulated cross build cannot
  if (std::string(LILY_BINARY).find(' ') == std::string::npos) {
    const auto bench = test::run_lily(args + " --contexts 24");
    ASSERT_EQ(bench.exit_code, 0) << bench.err;
    EXPECT_NE(bench.out.find("mtp 2 @ d24:"), std::string::npos) << bench.out;
    EXPECT_NE(bench.out.find("(same tokens as plain decoding)"), std::string::npos) << bench.out;
    EXPECT_NE(bench.out.find("implied speed at acceptance 0.5:"), std::string::npos) << bench.out;
  }
  // a model without a head says so
  const auto none = test::run_lily("run " + test::tiny_model_dir() + " hi --max-tokens 2 --mtp 2");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("has no MTP head"), std::string::npos) << none.err;
}

TEST(Cli, QuantizeWritesAGgufThatRunsWithItsOwnTokenizer) {
  // The bundled model as one GGUF file: its tokenizer and chat template travel
  // in the metadata, and the same prompt gives the same greedy answer.
  test::TempDir dir;
  const std::string gguf = (dir.path() / "lily-tiny-f32.gguf").string();
  const auto q = test::run_lily("quantize --model " + test::tiny_model_dir() + " --out " + gguf + " --gguf f32");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const auto info = test::run_lily("info --model " + gguf);
  EXPECT_NE(info.out.find("tokenizer:    gpt2 (pre qwen2), 151936 tokens; chat template: yes"), std::string::npos)
      << info.out;
  const std::string ask = " \"What is 23 + 58?\" --max-tokens 12 --temperature 0 --no-think";
  const auto from_gguf = test::run_lily("run " + gguf + ask);
  const auto from_dir = test::run_lily("run " + test::tiny_model_dir() + ask);
  ASSERT_EQ(from_gguf.exit_code, 0) << from_gguf.err;
  EXPECT_EQ(from_gguf.out, from_dir.out);
  EXPECT_NE(from_gguf.err.find("prompt: 22 tokens"), std::string::npos) << from_gguf.err;
  const auto mixed = test::run_lily("quantize --model " + test::tiny_model_dir() + " --out " + gguf + " --gguf q4_k");
  EXPECT_NE(mixed.exit_code, 0);
  EXPECT_NE(mixed.err.find("--gguf q4_k is not a type lily writes"), std::string::npos) << mixed.err;
}

TEST(Cli, BadInputGetsAClearErrorAndNoCrash) {
  const std::string m = test::model_dir("tiny-a");
  struct Bad {
    std::string args, needle;
  };
  for (const Bad& b : std::vector<Bad>{
           {"generate --model " + m + " --tokens 1,x,3", "'x' is not a token id"},
           {"generate --model " + m + " --tokens 1,,3", "'' is not a token id"},
           {"generate --model " + m + " --tokens 1,320", "token id 320 at position 1 is outside the vocabulary"},
           {"generate --model /nonexistent/model --tokens 1", "no such directory"},
           {"logits --model " + m + " --tokens 1 --out /nonexistent/dir/x.f32", "cannot write"},
           {"info --model " + m + " --bogus-flag", "bogus-flag"},
           {"generate --tokens 1", "--model"},
           {"frobnicate", "frobnicate"},
           {"run hi --max-tokens 0", "not in range"},  // CLI11 versions word the range differently
           {"run " + test::tiny_model_dir(), "is a directory, not a prompt"},
           {"run hi --logit-bias 999999=1", "token id 999999 is outside the vocabulary"},
           {"run hi --logit-bias 5=nan", "must be a finite number"},
           {"run hi --logit-bias 5=1x", "is not ID=BIAS"},
           {"run hi --max-tokens 40000", "more than the context of 32768 tokens"},
       }) {
    const auto r = test::run_lily(b.args);
    EXPECT_NE(r.exit_code, 0) << b.args;
    EXPECT_LT(r.exit_code, 128) << "crashed: " << b.args;
    EXPECT_NE((r.err + r.out).find(b.needle), std::string::npos) << b.args << "\n" << r.err;
  }
}

TEST(Cli, ARecursiveChatTemplateIsAnErrorNotACrash) {
  test::TempDir d;
  test::copy_dir(test::tiny_model_dir(), d.str());
  test::write_file(d.str() + "/chat_template.jinja", "{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}");
  const auto r = test::run_lily("run " + d.str() + " hi --max-tokens 2");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("nested deeper"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lily
