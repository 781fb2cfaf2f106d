// The measurement contract of `lily bench` (Perplexity Lily's, so numbers
// compare): batch 1, greedy, a synthetic prompt whose token i is
// ((i * 2654435761) mod 2^32) mod vocab, an exact-shape warm-up on a
// throw-away state, one measured prefill ending at the first token, then
// exactly `decode_steps` measured decode steps.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "lily/backend/backend.h"
#include "lily/model/model.h"

namespace lily {

struct BenchResult {
  int64_t context = 0;
  double prefill_seconds = 0;  // prompt in, first token out
  double decode_seconds = 0;   // the measured decode steps
  int64_t decode_steps = 0;
  int32_t first_token = 0;
  uint64_t token_digest = 0;   // FNV-1a over the generated ids
  std::vector<double> step_seconds;
  // per decode step, on a device backend (see DeviceActivity): the
  // operations it queued and the wall time the host was not waiting for it
  std::vector<uint64_t> step_operations;
  std::vector<double> step_host_seconds;

  // With --mtp: the same number of tokens again from the same prompt state,
  // drafted by the MTP head and verified (greedy, so the same tokens).
  struct Speculation {
    int64_t drafts = 0;                // per verify step
    int64_t steps = 0, accepted = 0, tokens = 0;
    double seconds = 0;
    uint64_t token_digest = 0;         // equals the plain decode's
    std::vector<double> draft_seconds, verify_seconds;  // per step
    double tok_s() const { return seconds > 0 ? tokens / seconds : 0; }
  } mtp;

  double prefill_tok_s() const { return prefill_seconds > 0 ? context / prefill_seconds : 0; }
  double decode_tok_s() const { return decode_seconds > 0 ? decode_steps / decode_seconds : 0; }
  nlohmann::json to_json() const;
};

std::vector<int32_t> bench_prompt(int64_t length, int64_t vocab);
// `backend`: where it runs (the CPU when null).
// `mtp` > 0: also speculative decoding with that many drafts a step (the
// prompt then keeps the MTP head up, and the plain steps run without it).
BenchResult run_bench(const Model& model, int64_t context, int64_t decode_steps,
                      std::shared_ptr<Backend> backend = nullptr, int64_t mtp = 0);

}  // namespace lily
