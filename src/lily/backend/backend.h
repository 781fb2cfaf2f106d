// What the model asks of the hardware it runs on. A backend owns the weights
// it computes with (bound once: the CPU reads the mapped file in place, a GPU
// holds an uploaded copy), the sequence states (KV cache, conv and recurrent
// state) and the activations, and implements every operation of the forward
// pass on them. The model file says which operation follows which; the
// backend says how each is computed, on which threads or streams.
//
// Row kinds: a Prompt call's rows are the tokens of prompts (tiled products,
// the chunked delta rule), a Tokens call's rows are decode tokens (one per
// sequence, or consecutive steps of one sequence where a speculative step
// verifies drafts). Each kind gives a row the same result whatever else
// shares the call, which makes batched decoding, resumed prompts and
// speculative decoding exact.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lily/backend/tensor.h"

namespace lily {

enum class RowKind { Prompt, Tokens };

// The shape of one sequence's state: per layer, either Gated DeltaNet
// (conv rows and a [v_heads, dk, dv] recurrent state) or attention (a KV
// cache of [positions, kv_heads, head_dim] that grows).
struct StateLayout {
  std::vector<bool> delta_layer;  // per layer: true for Gated DeltaNet, false for attention
  int64_t conv_rows = 0, conv_dim = 0;
  int64_t value_heads = 0, key_dim = 0, value_dim = 0;
  int64_t kv_heads = 0, head_dim = 0;
};

// One sequence's state in a backend's memory.
class StateStorage {
 public:
  virtual ~StateStorage() = default;
  virtual std::unique_ptr<StateStorage> clone() const = 0;  // a snapshot, in the same memory
  virtual void reset() = 0;                                  // back to the empty sequence
  virtual size_t bytes() const = 0;

  // What speculative decoding needs to take back tokens a verify step
  // consumed. A copy of the conv and recurrent states alone (attention
  // caches left empty); they are what cannot be cut back.
  virtual std::unique_ptr<StateStorage> clone_recurrent() const { throw_untakeable(); }
  // The conv and recurrent states of `from`, a clone_recurrent() of this state.
  virtual void restore_recurrent(const StateStorage& from) { (void)from, throw_untakeable(); }
  // Attention layer `layer`'s cache keeps its first `tokens` positions.
  virtual void truncate(int64_t layer, int64_t tokens) { (void)layer, (void)tokens, throw_untakeable(); }
  // Layers of the layout it was made for.
  virtual int64_t layer_count() const = 0;

 private:
  [[noreturn]] static void throw_untakeable();
};

// Consecutive rows [row, row + rows) of a call belong to one sequence, which
// held `position` tokens before the call.
struct SeqSlice {
  StateStorage* state;
  int64_t row, rows, position;
};

struct MatmulJob {
  const Tensor* x;  // [T, w->cols]
  const Matrix* w;
  Tensor* y;        // [T, w->rows]
};

// The matrices of one sparse MoE block.
struct ExpertWeights {
  const Matrix* router;                     // [experts, hidden]
  std::span<const Matrix> gate, up, down;   // per expert
  const Matrix *shared_gate, *shared_up, *shared_down;
  const Matrix* shared_expert_gate;         // [1, hidden]
};

// The expert choices of each MoE call, recorded by one backend and replayed
// by another: tiny random models route chaotically (a rounding-sized change
// flips a near-tie expert), so two backends are compared on the same choices.
struct RouteLog {
  enum class Mode { Record, Replay } mode = Mode::Record;
  std::vector<std::vector<int32_t>> experts;  // per call: [T, k]
  std::vector<std::vector<float>> weights;    // per call: [T, k]
  size_t next = 0;                            // the call to replay next

  // Record: keeps the call's route. Replay: overwrites it with the recorded one.
  void apply(std::vector<int32_t>& expert, std::vector<float>& weight);
};

struct DeltaShape {
  int64_t key_heads, value_heads, key_dim, value_dim;
  int64_t conv_kernel;
  int64_t chunk;  // prompt rows go through the chunked rule in chunks aligned to absolute positions
  bool tiled_value_heads = false;  // value head v reads key head v % key_heads, not v / (value_heads / key_heads)

  int64_t key_head_of(int64_t v) const { return tiled_value_heads ? v % key_heads : v / (value_heads / key_heads); }
};

struct AttentionShape {
  int64_t heads, kv_heads, head_dim, rotary_dim;
  double rope_theta;
};

// How one row of logits becomes a token. With temperature 0 the pick is the
// largest adjusted logit (the lowest id on ties). Otherwise the candidates
// are the tokens in the order (adjusted logit descending, id ascending), cut
// to the first top_k (0: all), then to the shortest prefix whose
// probabilities (softmax at `temperature`, over the top_k) reach top_p, then
// to those whose probability is at least min_p times the first's; the token
// is where u * (their total probability) falls when they are taken in id
// order. `u` is the caller's uniform draw in [0, 1), so the caller's
// generator decides reproducibility.
struct LogitAdjust {
  int32_t id = 0;
  float bias = 0;         // added first
  bool repeated = false;  // then the repetition penalty: l > 0 ? l / rp : l * rp
  float subtract = 0;     // then presence and frequency penalties
};
struct TokenPick {
  double temperature = 0, top_p = 1, min_p = 0, u = 0;
  int64_t top_k = 0;
  float repetition_penalty = 1;
  std::vector<LogitAdjust> adjust;  // at most one entry per id
};


// What the host has asked of a device so far: the operations queued on it
// (kernel launches and copies) and the seconds the host spent waiting for
// it. `lily bench` reports both per decode step: the launches a step costs
// and the host's share of the step. All zero for a backend on the host.
struct DeviceActivity {
  uint64_t operations = 0;
  double wait_seconds = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string describe() const = 0;
  // The memory bandwidth the weights are read at, measured now, in bytes/s
  // (0 where it cannot be measured).
  virtual double read_bandwidth() { return 0; }
  // Bytes of the backend's own memory still free; 0 for the host's memory,
  // which the memory plan checks against its budget instead.
  virtual size_t memory_free() const { return 0; }
  virtual DeviceActivity activity() const { return {}; }
  // Brackets the work a device profiler attached to the process looks at
  // (Nsight Compute started with --profile-from-start off): lily bench
  // brackets its timed decode steps. Nothing for a backend on the host.
  virtual void profile(bool /*on*/) {}

  // Weights in this backend's memory (the CPU returns the view it was given).
  // Each call makes its own copy: whoever binds a set of views that share
  // storage (a tied head, expert slices) dedupes them.
  virtual Matrix bind(const Matrix& host) = 0;
  virtual Vector bind(const Vector& host) = 0;
  virtual std::unique_ptr<StateStorage> new_state(const StateLayout& layout) = 0;

  // Activations. A new tensor's values are unspecified (a backend may hand
  // out a buffer it used before): every op writes all of its output.
  virtual Tensor tensor(int64_t rows, int64_t cols) = 0;
  // An fp32 activation whatever the backend's activation type: for values
  // whose rounding would compound (the Gated DeltaNet's log decay and beta,
  // summed and multiplied over every token of the sequence).
  virtual Tensor wide_tensor(int64_t rows, int64_t cols) { return tensor(rows, cols); }
  virtual Tensor wide_from_host(std::span<const float> data, int64_t rows, int64_t cols) {
    return from_host(data, rows, cols);
  }
  virtual Tensor from_host(std::span<const float> data, int64_t rows, int64_t cols) = 0;
  virtual std::vector<float> to_host(const Tensor& t) = 0;
  // Rows `ids` of an embedding table.
  virtual Tensor embed(const Matrix& table, std::span<const int32_t> ids) = 0;
  // Rows `rows` of x, in that order.
  virtual Tensor gather(const Tensor& x, std::span<const int64_t> rows) = 0;

  // y = x * rsqrt(mean(x^2) + eps) * w over rows of w.size(); y may be x.
  virtual void rmsnorm(const Tensor& x, const Vector& w, float eps, Tensor& y) = 0;
  // x += y
  virtual void add(Tensor& x, const Tensor& y) = 0;
  // x += y, then h = rmsnorm(x) as rmsnorm computes it: the residual step
  // between blocks, one pass where a backend fuses it.
  virtual void add_rmsnorm(Tensor& x, const Tensor& y, const Vector& w, float eps, Tensor& h) {
    add(x, y);
    rmsnorm(x, w, eps, h);
  }
  // y = x W^T
  virtual void matmul(const Tensor& x, const Matrix& w, Tensor& y, RowKind kind) = 0;
  // Several products of the same rows and kind, each equal to its matmul alone.
  virtual void matmul_batch(std::span<const MatmulJob> jobs, RowKind kind) = 0;
  // The MoE block: softmax routing to the top k experts (weights renormalised),
  // SwiGLU experts, plus the sigmoid-gated shared expert.
  virtual void moe(const Tensor& x, const ExpertWeights& w, int64_t k, Tensor& y, RowKind kind) = 0;

  // Gated DeltaNet. conv_silu: the causal depthwise conv + SiLU of each
  // sequence's rows, its conv state advanced. `w` is [channels, kernel].
  virtual void conv_silu(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& x, const Vector& w,
                         const DeltaShape& s, Tensor& y) = 0;
  // In place: q and k heads of `mixed` ([T, q | k | v]) l2-normed (q also
  // scaled by 1/sqrt(key_dim)); beta = sigmoid(beta); decay = neg_exp_a *
  // softplus(decay + dt_bias), the log decay.
  virtual void delta_gates(Tensor& mixed, Tensor& beta, Tensor& decay, const Vector& neg_exp_a, const Vector& dt_bias,
                           const DeltaShape& s) = 0;
  // conv_silu into mixed, then delta_gates on it: one pass where a backend
  // fuses them.
  virtual void delta_inputs(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& qkv, const Vector& conv,
                            const Vector& neg_exp_a, const Vector& dt_bias, const DeltaShape& s, Tensor& mixed,
                            Tensor& beta, Tensor& decay) {
    conv_silu(layer, seqs, qkv, conv, s, mixed);
    delta_gates(mixed, beta, decay, neg_exp_a, dt_bias, s);
  }
  // The gated delta rule per value head over each sequence's rows, its
  // recurrent state advanced: recurrent steps for Tokens, chunks for Prompt.
  // out is [T, value_heads * value_dim].
  virtual void delta_rule(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& mixed, const Tensor& decay,
                          const Tensor& beta, const DeltaShape& s, RowKind kind, Tensor& out) = 0;
  // y = rmsnorm(x) * w * silu(z) over rows of w.size(); y may be x.
  virtual void gated_rmsnorm(const Tensor& x, const Tensor& z, const Vector& w, float eps, Tensor& y) = 0;

  // Gated attention. Splits [T, heads * (q_h | gate_h)] into q and gate.
  virtual void split_query_gate(const Tensor& qg, int64_t heads, int64_t head_dim, Tensor& q, Tensor& gate) = 0;
  // NeoX rotation of each head of x ([T, heads * head_dim]) at its sequence position.
  virtual void rope(Tensor& x, int64_t heads, std::span<const SeqSlice> seqs, const AttentionShape& s) = 0;
  // The attention's inputs from the projections: qg split into q and gate,
  // then the q heads and k's heads rmsnormed (q_norm, k_norm) and rotated, as
  // those ops compute them in that order; one pass where a backend fuses them.
  virtual void attention_inputs(const Tensor& qg, Tensor& k, const Vector& q_norm, const Vector& k_norm, float eps,
                                std::span<const SeqSlice> seqs, const AttentionShape& s, Tensor& q, Tensor& gate) {
    split_query_gate(qg, s.heads, s.head_dim, q, gate);
    rmsnorm(q, q_norm, eps, q);
    rmsnorm(k, k_norm, eps, k);
    rope(q, s.heads, seqs, s);
    rope(k, s.kv_heads, seqs, s);
  }
  // Appends k and v to each sequence's cache, then causal grouped-query
  // attention of q over it: out [T, heads * head_dim].
  virtual void attention(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& q, const Tensor& k,
                         const Tensor& v, const AttentionShape& s, Tensor& out) = 0;
  // x *= sigmoid(gate)
  virtual void sigmoid_mul(Tensor& x, const Tensor& gate) = 0;

  // The next token of each row of `logits` [n, vocab] (picks.size() == n),
  // chosen where the logits are, so only the ids cross to the host.
  virtual std::vector<int32_t> pick_tokens(const Tensor& logits, std::span<const TokenPick> picks) = 0;

  // The device work of one decode step: `queue` queues the step's operations
  // for the tokens `ids` (one per row) at the positions `seqs` give, and
  // returns its logits. A backend may record that work the first time a step
  // of the same shape comes twice (the same program, the same states, the
  // same rows) and replay the recording afterwards with only the ids and
  // positions changed, bit for bit what queueing gives. The logits are then
  // the recording's own memory: valid until the next step of that shape.
  // Nothing that `queue` does outside the backend runs on a replay.
  virtual Tensor decode_step(std::span<const int32_t> ids, std::span<const SeqSlice> seqs, const void* program,
                             const std::function<Tensor()>& queue) {
    (void)ids, (void)seqs, (void)program;
    return queue();
  }

  // Every moe() call records its routing to `log`, or takes it from it; null turns that off.
  void set_route_log(RouteLog* log) { route_log_ = log; }

 protected:
  RouteLog* route_log_ = nullptr;
};

}  // namespace lily
