// `lily run`, `lily chat`, `lily template`, `lily tokenize` and `lily
// detokenize` driven as a person would: through pipes and a pseudo-terminal.
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/test_support.h"

namespace lily {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// GPT-2's byte-to-printable-character map, to write a byte-level vocabulary.
std::string byte_char(int b) {
  int extra = 0;
  for (int x = 0; x < 256; ++x) {
    const bool printable = (x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff);
    const int cp = printable ? x : 256 + extra++;
    if (x == b) {
      std::string s;
      if (cp < 0x80) s += static_cast<char>(cp);
      else s += static_cast<char>(0xc0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3f));
      return s;
    }
  }
  return "";
}

// A fixture checkpoint made usable for chat: tiny-a-release (vocab 320) with a
// byte-level tokenizer of 256 bytes, a few merges and the chat specials.
std::string chat_fixture(const test::TempDir& d) {
  const std::string dir = d.str() + "/model";
  test::copy_dir(test::model_dir("tiny-a-release"), dir);
  ordered_json vocab = ordered_json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"Ġ", "t"}};
  int id = 256;
  ordered_json merge_list = ordered_json::array();
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    merge_list.push_back(a + " " + b);
  }
  ordered_json added = ordered_json::array();
  int sid = 300;
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"})
    added.push_back({{"id", sid++}, {"content", s}, {"special", true}});
  const std::string regex = nlohmann::json::parse(test::read_file(test::tiny_model_dir() + "/tokenizer.json"))
                                ["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"];
  ordered_json tok = {{"added_tokens", added},
                      {"normalizer", {{"type", "NFC"}}},
                      {"pre_tokenizer",
                       {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}},
                                           {{"type", "ByteLevel"}}}}}},
                      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
  test::write_file(dir + "/tokenizer.json", tok.dump());
  test::write_file(dir + "/tokenizer_config.json", R"({"eos_token": "<|im_end|>", "bos_token": null})");
  fs::copy_file(test::tiny_model_dir() + "/chat_template.jinja", dir + "/chat_template.jinja");
  return dir;
}

TEST(RunCli, BundledModelAnswersAPrompt) {
  const auto r = test::run_lily("run hello --max-tokens 20 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("<think>"), std::string::npos) << r.out;  // reasoning set apart off a terminal
  EXPECT_NE(r.err.find("generation: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos);
  const auto again = test::run_lily("run hello --max-tokens 20 --seed 3");
  EXPECT_EQ(again.out, r.out);  // same seed, same answer
  const auto hidden = test::run_lily("run hello --max-tokens 20 --seed 3 --hide-reasoning --quiet");
  EXPECT_EQ(hidden.out.find("<think>"), std::string::npos);
  EXPECT_EQ(hidden.err, "");
}

TEST(RunCli, FixtureDirectoryWithGreedyDecoding) {
  test::TempDir d;
  const std::string model = chat_fixture(d);
  const auto a = test::run_lily("run " + model + " 'hello there' --no-think --temperature 0 --max-tokens 12");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto b = test::run_lily("run " + model + " 'hello there' --no-think --temperature 0 --max-tokens 12");
  EXPECT_EQ(a.out, b.out);
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.out.find("<think>"), std::string::npos);  // --no-think: no reasoning phase
  EXPECT_NE(a.err.find("prompt: "), std::string::npos);
}

TEST(RunCli, BadInputGetsClearErrors) {
  test::TempDir d;
  struct Bad {
    std::string args, needle;
  };
  test::copy_dir(test::model_dir("tiny-c"), d.str() + "/notok");
  const std::string model = chat_fixture(d);
  test::copy_dir(model, d.str() + "/corrupt");
  test::write_file(d.str() + "/corrupt/tokenizer.json", "{\"model\": ");
  for (const Bad& b : std::vector<Bad>{
           {"run " + d.str() + "/notok hi", "no tokenizer.json"},
           {"run " + d.str() + "/corrupt hi", "tokenizer.json: malformed JSON"},
           {"run " + model + " \"$(printf 'bad \\377 utf8')\"", "not valid UTF-8"},
           {"run " + model + " hi --top-p 5", "top_p must be in (0, 1]"},
           {"run " + model + " hi --logit-bias nonsense", "is not ID=BIAS"},
           {"run " + model + " hi --warp-speed", "warp-speed"},
           {"run Org/NotDownloaded hi", "not in the Hugging Face cache"},
           {"run " + model + " hi --memory-budget 0.0001", "does not fit the memory budget"},
           {"run " + model + " hi --deployment-config " + d.str() + "/missing.json", "cannot read"},
       }) {
    const auto r = test::run_lily(b.args);
    EXPECT_NE(r.exit_code, 0) << b.args;
    EXPECT_LT(r.exit_code, 128) << "crashed: " << b.args;
    EXPECT_NE((r.err + r.out).find(b.needle), std::string::npos) << b.args << "\n" << r.err;
  }
}

TEST(ChatCli, MultiTurnThroughPipesReusesTheHistory) {
  test::TempDir d;
  const std::string model = chat_fixture(d);
  const std::string script = d.str() + "/in.txt";
  test::write_file(script, "hello\nand again\n\xff\xfe broken\n/reset\nfresh start\n/exit\nnever read\n");
  const auto r = test::run_lily("chat " + model + " --temperature 0 --max-tokens 6", script);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("error: input is not valid UTF-8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(conversation cleared)"), std::string::npos) << r.out;
  // three answered turns; the second reuses the first turn's prompt from the checkpoint
  std::vector<std::string> speed;
  for (size_t p = r.err.find("[prompt: "); p != std::string::npos; p = r.err.find("[prompt: ", p + 1))
    speed.push_back(r.err.substr(p, r.err.find(']', p) - p));
  ASSERT_EQ(speed.size(), 3u) << r.err;
  EXPECT_NE(speed[0].find("(0 reused)"), std::string::npos) << speed[0];
  EXPECT_EQ(speed[1].find("(0 reused)"), std::string::npos) << speed[1];
  EXPECT_NE(speed[2].find("(0 reused)"), std::string::npos) << speed[2];  // after /reset
}

// Reads from the pty until `needle` appears or `seconds` pass.
bool read_until(int fd, std::string& seen, const std::string& needle, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    if (seen.find(needle) != std::string::npos) return true;
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(fd, &fds);
    timeval tv{0, 100000};
    if (select(fd + 1, &fds, nullptr, nullptr, &tv) > 0) {
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;
      seen.append(buf, static_cast<size_t>(n));
    }
  }
  return seen.find(needle) != std::string::npos;
}

TEST(ChatCli, CtrlCStopsTheAnswerAndKeepsTheSession) {
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // a long answer, so Ctrl-C arrives mid-generation: the random-weight
    // model's, which never ends on its own
    execl(LILY_BINARY, LILY_BINARY, "chat", LILY_RANDOM_MODEL_DIR, "--max-tokens", "30000", "--seed", "1",
          "--hide-reasoning", nullptr);
    _exit(127);
  }
  std::string seen;
  ASSERT_TRUE(read_until(master, seen, "> ", 60)) << seen;
  ASSERT_EQ(write(master, "tell me a story\n", 16), 16);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_EQ(write(master, "\x03", 1), 1);  // Ctrl-C
  EXPECT_TRUE(read_until(master, seen, "(stopped)", 30)) << seen;
  // the next prompt may have come in the same read: look only past "(stopped)"
  seen.erase(0, seen.find("(stopped)") + std::string("(stopped)").size());
  EXPECT_TRUE(read_until(master, seen, "> ", 30)) << seen;  // the session goes on
  ASSERT_EQ(write(master, "\x03", 1), 1);                   // Ctrl-C at the prompt does not end it
  EXPECT_TRUE(read_until(master, seen, "type /exit", 30)) << seen;
  ASSERT_EQ(write(master, "/exit\n", 6), 6);
  int status = 0;
  for (int i = 0; i < 300 && waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (waitpid(pid, &status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "chat did not exit";
  }
  close(master);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(TextCli, TemplateTokenizeDetokenize) {
  test::TempDir d;
  const std::string m = test::tiny_model_dir();
  test::write_file(d.str() + "/msgs.json", R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  test::write_file(d.str() + "/tools.json", R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])");
  auto r = test::run_lily("template --model " + m + " --messages " + d.str() + "/msgs.json --kwarg enable_thinking=false");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\n");
  r = test::run_lily("template --model " + m + " --messages " + d.str() + "/msgs.json --tools " + d.str() +
                     "/tools.json --no-generation-prompt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}\n</tools>"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("<|im_start|>assistant"), std::string::npos);

  r = test::run_lily("tokenize --model " + m + " --text 'Hello world'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ids = ordered_json::parse(r.out).get<std::vector<int32_t>>();
  EXPECT_EQ(ids, (std::vector<int32_t>{9707, 1879}));
  r = test::run_lily("detokenize --model " + m + " --tokens 9707,1879,151645");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ordered_json::parse(r.out).get<std::string>(), "Hello world<|im_end|>");

  test::write_file(d.str() + "/late.json", R"([{"role": "user", "content": "Hi"}, {"role": "system", "content": "x"}])");
  test::write_file(d.str() + "/broken.json", "[{\"role\": ");
  test::write_file(d.str() + "/deep.json", std::string(100000, '[') + std::string(100000, ']'));
  struct Bad {
    std::string args, needle;
  };
  for (const Bad& b : std::vector<Bad>{
           {"template --model " + m + " --messages " + d.str() + "/late.json",
            "chat template error: System message must be at the beginning."},
           {"template --model " + m + " --messages " + d.str() + "/broken.json", "is not valid JSON"},
           {"template --model " + m + " --messages " + d.str() + "/nothing.json", "cannot read"},
           {"template --model " + m + " --messages " + d.str() + "/deep.json", "nested deeper than 64"},
           {"template --model " + m + " --messages /dev/zero", "not a regular file"},
           {"template --model " + m + " --messages " + d.str() + "/msgs.json --kwarg novalue", "is not name=value"},
           {"detokenize --model " + m + " --tokens 99999999", "outside the vocabulary"},
           {"tokenize --model " + m + " --text \"$(printf '\\300\\200')\"", "not valid UTF-8"},
       }) {
    const auto e = test::run_lily(b.args);
    EXPECT_NE(e.exit_code, 0) << b.args;
    EXPECT_LT(e.exit_code, 128) << b.args;
    EXPECT_NE((e.err + e.out).find(b.needle), std::string::npos) << b.args << "\n" << e.err;
  }
}

}  // namespace
}  // namespace lily
