// Command-line flags shared by the commands that generate text: the model,
// sampling parameters, limits and thinking, applied over the model's defaults.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lily/cli/cpu_flags.h"
#include "lily/router/deployment_config.h"
#include "lily/runtime/engine.h"
#include "lily/runtime/sampler.h"

namespace lily::cli {

struct GenerationFlags {
  std::optional<double> temperature, top_p, min_p, presence_penalty, frequency_penalty, repetition_penalty;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  std::vector<std::string> logit_bias;  // "ID=BIAS"
  std::vector<std::string> stop;
  int64_t max_tokens = 512;
  bool no_think = false;
  bool hide_reasoning = false;
  std::string system;
  double memory_budget_gb_flag = 0;  // 0: none
  std::string deployment_config;  // JSON with memoryAllocationGB
  int64_t context = 0;          // chat: the longest conversation to plan for (0: the model's maximum)
  CpuFlags cpu;                 // --int8-activations, --no-mmap
  int64_t mtp = 0;              // drafts per step from the MTP head (0: no speculative decoding)

  void add_to(CLI::App* app);
  // The model's defaults with the flags given on the command line applied.
  SamplingParams sampling(const Engine& engine) const;
  // Plans memory for `context` tokens (prefilling `prompt` at once), prints the
  // plan when a budget is set, and refuses with the numbers when it does not fit.
  void check_memory(const Engine& engine, int64_t context, int64_t prompt) const;
};

// --deployment-config's file, read and checked whole (an unknown key is an
// error); errors name the flag.
router::DeploymentConfig read_deployment_config(const std::string& path);
// The memory budget in GiB: the flag, else the deployment config's memoryAllocationGB, else 0 (none).
double memory_budget_gb(double flag_gb, const std::string& deployment_config);
double memory_budget_gb(double flag_gb, const router::DeploymentConfig* deployment);

// The model directory to use: the one named, else $LILY_MODEL, else the small model shipped with Lily.
std::string default_model();

}  // namespace lily::cli
