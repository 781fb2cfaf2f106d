#include "lily/cli/generation_flags.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/io/executable_path.h"
#include "lily/runtime/memory_plan.h"

namespace lily::cli {

void GenerationFlags::add_to(CLI::App* app) {
  app->add_option("--temperature", temperature, "sampling temperature (0 = greedy)");
  app->add_option("--top-k", top_k, "keep the k most likely tokens (0 = off)");
  app->add_option("--top-p", top_p, "nucleus sampling mass");
  app->add_option("--min-p", min_p, "drop tokens below this fraction of the top probability");
  app->add_option("--presence-penalty", presence_penalty, "penalty for tokens already generated");
  app->add_option("--frequency-penalty", frequency_penalty, "penalty per occurrence of a generated token");
  app->add_option("--repetition-penalty", repetition_penalty, "divide logits of seen tokens (1 = off)");
  app->add_option("--seed", seed, "random seed for reproducible sampling");
  app->add_option("--logit-bias", logit_bias, "ID=BIAS added to a token's logit (repeatable)");
  app->add_option("--stop", stop, "stop when this text is generated (repeatable)");
  app->add_option("--max-tokens", max_tokens, "maximum tokens to generate")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  app->add_flag("--no-think", no_think, "answer without a reasoning phase (enable_thinking=false)");
  app->add_flag("--hide-reasoning", hide_reasoning, "do not print the reasoning");
  app->add_option("--system", system, "system prompt");
  app->add_option("--memory-budget", memory_budget_gb_flag, "GiB the model may use (weights, caches, scratch); refuse beyond it")
      ->envname("LILY_MEMORY_BUDGET_GB");
  app->add_option("--deployment-config", deployment_config, "JSON deployment config; its memoryAllocationGB is the budget");
  app->add_option("--ctx-size", context, "longest context to plan memory for (chat; default: the model's maximum)");
  app->add_option("--mtp", mtp,
                  "speculative decoding: K tokens drafted per step by the checkpoint's MTP head and verified in one "
                  "step (output unchanged; 0 = off)")
      ->check(CLI::Range(0, 8));
  cpu.add_to(app);
}

SamplingParams GenerationFlags::sampling(const Engine& engine) const {
  SamplingParams p = engine.default_sampling();
  if (temperature) p.temperature = *temperature;
  if (top_k) p.top_k = *top_k;
  if (top_p) p.top_p = *top_p;
  if (min_p) p.min_p = *min_p;
  if (presence_penalty) p.presence_penalty = *presence_penalty;
  if (frequency_penalty) p.frequency_penalty = *frequency_penalty;
  if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
  if (seed) p.seed = *seed;
  const int64_t vocab = engine.model().config().vocab_size;
  for (const auto& b : logit_bias) {
    const size_t eq = b.find('=');
    int64_t id = -1;
    float bias = 0;
    try {
      size_t used_id = 0, used_bias = 0;
      if (eq == std::string::npos) throw std::invalid_argument(b);
      id = std::stoll(b.substr(0, eq), &used_id);
      bias = std::stof(b.substr(eq + 1), &used_bias);
      if (used_id != eq || used_bias != b.size() - eq - 1) throw std::invalid_argument(b);
    } catch (const std::exception&) {
      throw Error("--logit-bias: '" + b + "' is not ID=BIAS");
    }
    if (id < 0 || id >= vocab)
      throw Error("--logit-bias: token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(vocab - 1) + ")");
    if (!std::isfinite(bias)) throw Error("--logit-bias: the bias for token " + std::to_string(id) + " must be a finite number");
    p.logit_bias[static_cast<int32_t>(id)] = bias;
  }
  p.validate();
  return p;
}

router::DeploymentConfig read_deployment_config(const std::string& path) {
  try {
    return router::load_deployment_config(path);
  } catch (const Error& e) {
    throw Error(std::string("--deployment-config: ") + e.what());
  }
}

double memory_budget_gb(double flag_gb, const router::DeploymentConfig* deployment) {
  return flag_gb > 0 || !deployment ? flag_gb : deployment->memory_allocation_gb;
}

double memory_budget_gb(double flag_gb, const std::string& deployment_config) {
  if (flag_gb > 0 || deployment_config.empty()) return flag_gb;
  const router::DeploymentConfig d = read_deployment_config(deployment_config);
  return memory_budget_gb(flag_gb, &d);
}

void GenerationFlags::check_memory(const Engine& engine, int64_t context, int64_t prompt) const {
  const double budget = memory_budget_gb(memory_budget_gb_flag, deployment_config);
  const MemoryPlan plan = plan_memory(engine.model(), context, prompt);
  if (budget > 0) std::cerr << plan.describe() << "\n";
  // On a GPU the weights are already there: the rest must fit what it has left.
  if (const size_t free = engine.backend()->memory_free(); free > 0 && plan.total() - plan.weights > free)
    throw Error("a context of " + std::to_string(context) + " tokens needs " +
                std::to_string((plan.total() - plan.weights) >> 20) + " MiB beyond the weights, but " +
                engine.backend()->describe() + " has " + std::to_string(free >> 20) + " MiB free");
  try {
    check_memory_budget(plan, budget);
  } catch (const Error& e) {
    throw Error("a context of " + std::to_string(context) + " tokens " + e.what());
  }
}

std::string default_model() {
  if (const char* m = std::getenv("LILY_MODEL"); m && *m) return m;
  // Installed: the model lies in the data folder beside the binary's
  // (<prefix>/bin/lily and <prefix>/share/lily/models/lily-tiny), wherever
  // the prefix was moved. Built: the source tree's copy.
  const std::filesystem::path exe = executable_path();
  std::vector<std::filesystem::path> looked;
  if (!exe.empty()) looked.push_back(exe.parent_path() / LILY_INSTALLED_DATA_RELATIVE / "models" / "lily-tiny");
  looked.push_back(LILY_SOURCE_MODEL_DIR);
  std::string where;
  for (const auto& dir : looked) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / "config.json", ec)) return dir.lexically_normal().string();
    where += (where.empty() ? "" : ", ") + dir.lexically_normal().string();
  }
  throw Error("no model was named and the bundled model is not where it is installed (looked in " + where +
              "): name one with --model or $LILY_MODEL");
}

}  // namespace lily::cli
