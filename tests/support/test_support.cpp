#include "support/test_support.h"

#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>

namespace lily::test {

namespace fs = std::filesystem;

std::string data_dir() { return LILY_TEST_DATA_DIR; }
std::string model_dir(const std::string& n) { return data_dir() + "/models/" + n; }
std::string tiny_model_dir() { return LILY_TINY_MODEL_DIR; }

TempDir::TempDir() {
  std::random_device rd;
  path_ = fs::temp_directory_path() / ("lily-test-" + std::to_string(rd()) + std::to_string(rd()));
  fs::create_directories(path_);
}
TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void copy_dir(const std::string& src, const std::string& dst) {
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(src))
    fs::copy_file(e.path(), fs::path(dst) / e.path().filename(), fs::copy_options::overwrite_existing);
}

Reference load_reference(const std::string& dir) {
  const auto j = nlohmann::json::parse(read_file(dir + "/reference.json"));
  Reference r;
  r.vocab = j["vocab_size"].get<int64_t>();
  for (const auto& p : j["prompts"]) {
    ReferencePrompt rp;
    rp.tokens = p["tokens"].get<std::vector<int32_t>>();
    rp.greedy = p["greedy"].get<std::vector<int32_t>>();
    const std::string bytes = read_file(dir + "/" + p["logits"].get<std::string>());
    rp.logits.resize(bytes.size() / sizeof(float));
    std::memcpy(rp.logits.data(), bytes.data(), bytes.size());
    r.prompts.push_back(std::move(rp));
  }
  return r;
}

double max_row_relative_error(const std::vector<float>& a, const std::vector<float>& b, int64_t cols) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t r = 0; r * cols < a.size(); ++r) {
    double num = 0, den = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double x = a[r * cols + c], y = b[r * cols + c];
      num += (x - y) * (x - y);
      den += y * y;
    }
    const double e = std::sqrt(num / den);
    if (!(e <= worst)) worst = e;  // NaN propagates as the worst
  }
  return worst;
}

RunResult run_lily(const std::string& args, const std::string& input_file) {
  TempDir tmp;
  const std::string out = tmp.str() + "/out", err = tmp.str() + "/err";
  const std::string cmd = std::string(LILY_BINARY) + " " + args + " >" + out + " 2>" + err + " <" + input_file;
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

cpu::CpuContext cpu_context(cpu::Isa isa, bool int8, int threads) {
  cpu::CpuOptions o;
  o.isa = isa;
  o.threads = threads;
  o.int8 = int8 ? cpu::CpuOptions::Int8::On : cpu::CpuOptions::Int8::Off;
  return cpu::make_cpu_context(o);
}

}  // namespace lily::test
