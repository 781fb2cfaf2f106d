// The Qwen3.5/3.6 MoE forward pass, written once over the Backend's
// operations: embeddings, 40 (or, for test models, any number of) decoder
// layers that mix Gated DeltaNet and gated full attention, each followed by
// the sparse MoE block, then the final norm and the untied head. Which
// backend computes it (and where the weights and states live) is chosen when
// it is made; nothing here touches an activation's memory.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "lily/backend/backend.h"
#include "lily/model/model.h"
#include "lily/model/sequence_state.h"

namespace lily {

// Which rows get logits: every token's, the last token's, or (for several
// sequences in one call) the last token of each sequence.
enum class LogitsFor { AllPositions, LastPosition, LastOfEachSequence };

// How tokens are computed. A prompt goes through the chunked delta rule and
// tiled matrix products; a decode step through the recurrent step and plain
// dots. Either way a token's result does not depend on what else shares the
// call, which is what makes a resumed prompt and a batched decode step exact.
enum class ForwardMode { Prompt, Decode };

class Qwen35MoeForward {
 public:
  // Binds the model's weights to `backend` (the CPU backend when null).
  explicit Qwen35MoeForward(const Model& model, std::shared_ptr<Backend> backend = nullptr);

  // An empty sequence, its state in the backend's memory.
  SequenceState new_state() const;
  Backend& backend() const { return *backend_; }

  // Consumes `tokens` at the state's current position and advances it.
  // Returns logits [rows, vocab] where rows is tokens.size() or 1.
  // Throws lily::Error for a token outside the vocabulary, before touching the state.
  // One token is taken as a decode step, more as a prompt.
  std::vector<float> forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which);
  std::vector<float> forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which, ForwardMode mode);
  // The same, for the last position, with the next token chosen by the
  // backend where the logits are (only the id crosses to the host).
  int32_t forward_pick(std::span<const int32_t> tokens, SequenceState& state, ForwardMode mode, const TokenPick& pick);

  // One decode step for several sequences: tokens[i] continues *states[i].
  // Returns logits [n, vocab]; row i is bit for bit what forward() gives for
  // that sequence alone, so batching never changes an answer.
  std::vector<float> decode_batch(std::span<const int32_t> tokens, std::span<SequenceState* const> states);

  // Prompt pieces of several sequences in one call: pieces[i] continues
  // *states[i]. Every weight is read (and dequantized) once for all of them.
  // Returns the logits of each piece's last token [n, vocab], bit for bit
  // what forward() in Prompt mode gives that piece alone.
  std::vector<float> prefill_batch(std::span<const std::vector<int32_t>> pieces, std::span<SequenceState* const> states);

  // Prompts are processed by the chunked delta rule above one token; this is
  // its chunk length. Chunks are aligned to absolute positions, so resuming
  // from a state saved at a multiple of it reproduces a fresh prefill exactly.
  static constexpr int64_t kDeltaChunk = 64;

 private:
  // Consecutive rows [row, row + rows) of the activations belong to one sequence.
  struct Segment {
    SequenceState* state;
    int64_t row, rows;
  };
  std::vector<float> run(std::span<const int32_t> tokens, std::span<const Segment> segs, ForwardMode mode,
                         LogitsFor which);
  Tensor run_logits(std::span<const int32_t> tokens, std::span<const Segment> segs, ForwardMode mode, LogitsFor which);
  // The backend work of run_logits, the states' positions left as they are.
  Tensor queue_logits(std::span<const int32_t> tokens, std::span<const SeqSlice> seqs, ForwardMode mode,
                      LogitsFor which);
  void check_tokens(std::span<const int32_t> tokens) const;
  void gated_delta_net(int64_t layer, std::span<const SeqSlice> seqs, RowKind kind, const Tensor& x, Tensor& out);
  void attention(int64_t layer, std::span<const SeqSlice> seqs, RowKind kind, const Tensor& x, Tensor& out);

  const Model& model_;
  const ModelConfig& cfg_;
  std::shared_ptr<Backend> backend_;
  ModelWeights weights_;               // bound to the backend
  std::vector<ExpertWeights> experts_;  // per layer, views into weights_
  StateLayout layout_;
  DeltaShape delta_;
  AttentionShape attention_;
};

}  // namespace lily
