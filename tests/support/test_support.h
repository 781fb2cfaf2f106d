// Helpers shared by the tests: fixture paths, temporary directories, reference
// files and the relative error used to compare logits.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lily/backend/cpu/cpu_context.h"

namespace lily::test {

std::string data_dir();                       // tests/data
std::string model_dir(const std::string& n);  // tests/data/models/<n>
std::string tiny_model_dir();                 // models/lily-tiny, the model shipped with Lily

// A fresh directory removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

struct ReferencePrompt {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [tokens.size(), vocab]
  std::vector<int32_t> greedy;
};
struct Reference {
  int64_t vocab = 0;
  std::vector<ReferencePrompt> prompts;
};
// Reads reference.json and its logits files from a fixture directory.
Reference load_reference(const std::string& dir);

// max over rows of ||a - b|| / ||b||, rows of `cols`.
double max_row_relative_error(const std::vector<float>& a, const std::vector<float>& b, int64_t cols);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);
// Copies every file of a fixture directory into `dst`.
void copy_dir(const std::string& src, const std::string& dst);

struct RunResult {
  int exit_code;
  std::string out, err;
};
// Runs the lily binary with `args` (shell-quoted by the caller), stdin from `input_file` or /dev/null.
RunResult run_lily(const std::string& args, const std::string& input_file = "/dev/null");

// A CPU context at `isa` (tests run each level this CPU has: cpu::isas_here()).
cpu::CpuContext cpu_context(cpu::Isa isa, bool int8 = false, int threads = 2);

}  // namespace lily::test
