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

  // ---- Multi-token prediction: drafts from the MTP head, verified exactly ----
  //
  // The head at position p reads the token at p + 1 and the model's hidden
  // state at p, and predicts the token at p + 2; its one attention layer
  // keeps a cache like the model's own, in the same sequence state.
  // From now on every call that consumes rows also writes the head's cache
  // entries for them (only its attention inputs: cheap), so a draft can
  // start after any prefix, a resumed one included. States made from then
  // on have room for the head's cache; those made before are refused.
  // Throws lily::Error where the checkpoint has no head.
  void keep_mtp(bool on);
  // Up to `k` greedy drafts of the tokens after `next`, the token about to
  // be fed at the state's position: the head at the last consumed position,
  // then on its own outputs. Needs keep_mtp(true) since the state was empty.
  // The head's cache entries it writes past the consumed positions are
  // scratch: the next call that consumes rows rewrites them.
  std::vector<int32_t> draft(SequenceState& state, int32_t next, int64_t k);

  // Per layer, the Gated DeltaNet inputs of a call's rows, [rows, cols]
  // (the projections before the conv and the gates).
  struct DeltaInputs {
    std::vector<std::vector<float>> qkv, beta, decay;
  };
  // What rewind() needs to take back rows of one verify() call.
  struct Undo {
    int64_t position = 0, rows = 0;              // the state's position before the call; rows consumed
    std::unique_ptr<StateStorage> recurrent;     // conv and recurrent states before the call
    DeltaInputs inputs;                          // this sequence's rows
    std::vector<float> hidden;                   // [rows, hidden]: after the final norm (the MTP head's input)
    std::vector<float> mtp_hidden;               // the state's MTP input before the call
  };
  // Decode steps over consecutive tokens of one sequence in one call, every
  // weight read once for all of them: row i is computed exactly as a decode
  // step after rows 0..i-1 would be (recurrent steps in order, plain dots).
  // Returns logits [rows, vocab]; `undo` receives what rewind() needs.
  std::vector<float> verify(std::span<const int32_t> tokens, SequenceState& state, Undo& undo);
  // The same for several sequences in one call (rows[i] continues
  // *states[i], undos[i] receives its undo): logits of every row, sequence
  // after sequence; each sequence's rows are what verify() gives it alone.
  std::vector<float> verify_batch(std::span<const std::vector<int32_t>> rows, std::span<SequenceState* const> states,
                                  std::span<Undo> undos);
  // Keeps the first `keep` rows of the verify() that filled `undo`: the
  // state is then bit for bit what decode steps over those rows leave.
  void rewind(SequenceState& state, const Undo& undo, int64_t keep);

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
  // `hidden`, when given, receives every row's hidden state after the final norm.
  Tensor run_logits(std::span<const int32_t> tokens, std::span<const Segment> segs, ForwardMode mode, LogitsFor which,
                    std::vector<float>* hidden = nullptr);
  // The backend work of run_logits, the states' positions left as they are.
  // `residual`, when given, receives the residual stream of every row.
  Tensor queue_logits(std::span<const int32_t> tokens, std::span<const SeqSlice> seqs, ForwardMode mode,
                      LogitsFor which, Tensor* residual = nullptr);
  // The residual stream after the last layer, [tokens, hidden].
  Tensor queue_residual(std::span<const int32_t> tokens, std::span<const SeqSlice> seqs, RowKind kind);
  // The head's cache entries for the rows just consumed (`hidden`: [rows,
  // hidden] after the final norm), and each state's last hidden state.
  void keep_mtp_up(std::span<const int32_t> tokens, std::span<const Segment> segs, std::span<const float> hidden,
                   RowKind kind);
  // The head over rows at positions [position, position + rows): its cache
  // cut to `position`, then its attention over the rows. With `logits` the
  // last row goes on through the MoE, the norm and the LM head: returns its
  // logits and sets *hidden_out to its normed output.
  std::vector<float> mtp_rows(std::span<const int32_t> next_tokens, std::span<const float> hidden, SeqSlice at,
                              RowKind kind, bool logits, std::vector<float>* hidden_out);
  const LayerWeights& layer_weights(int64_t layer) const {
    return layer < cfg_.num_layers ? weights_.layers[static_cast<size_t>(layer)] : weights_.mtp->layer;
  }
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
  bool keep_mtp_ = false;
  DeltaInputs* recording_ = nullptr;  // set while verify_batch() runs: the Gated DeltaNet layers keep their inputs
};

}  // namespace lily
