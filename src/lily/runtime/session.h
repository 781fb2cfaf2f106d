// One conversation's place in the model: the sequence state, the tokens it
// holds, and a checkpoint of the state at a chosen position (the end of the
// history), so a later prompt that extends that history only prefills what
// is new. The GDN state cannot be rolled back token by token, which is why
// reuse goes through a saved copy rather than truncation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "lily/model/qwen35moe.h"

namespace lily {

class Session {
 public:
  // `backend`: where the model runs (the CPU when null).
  explicit Session(const Model& model, std::shared_ptr<Backend> backend = nullptr);

  // Brings the state to hold exactly `prompt` and returns the logits of its
  // last token. Reuses the current state or the checkpoint when either holds
  // a prefix of `prompt`. When `checkpoint_at` lies inside the part computed
  // now, the state at that position is saved as the new checkpoint.
  std::vector<float> prefill(const std::vector<int32_t>& prompt, size_t checkpoint_at = 0);
  // Feeds one generated token; returns the next logits.
  std::vector<float> step(int32_t token);
  // The same two, returning the next token the backend picks where the logits are.
  int32_t prefill_pick(const std::vector<int32_t>& prompt, size_t checkpoint_at, const TokenPick& pick);
  int32_t step_pick(int32_t token, const TokenPick& pick);
  void reset();

  // Speculative decoding with the checkpoint's MTP head: up to `drafts`
  // tokens drafted per step (0 turns it off). Starts the session afresh,
  // since the head must be kept up from the first token. Throws lily::Error
  // where the model has no head or the backend cannot take tokens back.
  void set_mtp(int64_t drafts);
  int64_t mtp() const { return mtp_; }
  static constexpr int64_t kMaxDrafts = 8;
  // Feeds `token` and the head's drafts after it in one verify step and
  // returns the logits of every row ([1 + drafts.size(), vocab]): row i is
  // what step() would return after token and drafts[0..i-1].
  std::vector<float> speculate(int32_t token, std::vector<int32_t>* drafts);
  // Keeps the first `rows` rows of the last speculate() (the token and the
  // drafts that were accepted); the state is then exactly as if step() had
  // fed just those.
  void accept(int64_t rows);

  size_t reused_tokens() const { return reused_; }  // of the last prefill
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const Model& model() const { return model_; }

 private:
  std::vector<float> feed(std::span<const int32_t> toks, ForwardMode mode);
  int32_t feed_pick(std::span<const int32_t> toks, ForwardMode mode, const TokenPick& pick);
  // Restores the longest reusable prefix of `prompt`, computes up to a
  // checkpoint inside it when asked, and returns what is left to compute.
  std::span<const int32_t> prepare(const std::vector<int32_t>& prompt, size_t checkpoint_at);

  const Model& model_;
  Qwen35MoeForward fwd_;
  SequenceState state_;
  std::vector<int32_t> tokens_;
  struct Checkpoint {
    SequenceState state;
    std::vector<int32_t> tokens;
  };
  std::optional<Checkpoint> checkpoint_;
  size_t reused_ = 0;
  int64_t mtp_ = 0;
  Qwen35MoeForward::Undo undo_;  // of the last speculate()
  bool checkpoint_after_ = false;  // the prompt being prefilled ends at its checkpoint
};

}  // namespace lily
