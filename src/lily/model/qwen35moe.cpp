#include "lily/model/qwen35moe.h"

#include <map>
#include <string>

#include "lily/backend/backend_factory.h"
#include "lily/error.h"

namespace lily {

namespace {

RowKind kind_of(ForwardMode mode) { return mode == ForwardMode::Prompt ? RowKind::Prompt : RowKind::Tokens; }

// The weight set with every matrix and vector in the backend's memory; a
// matrix seen twice (the head tied to the embedding) is bound once.
ModelWeights bound_to(Backend& backend, const ModelWeights& w, size_t bytes) {
  if (const size_t free = backend.memory_free(); free > 0 && bytes > free)
    throw Error("the weights need " + std::to_string(bytes >> 20) + " MiB but " + backend.describe() + " has " +
                std::to_string(free >> 20) + " MiB free: use a more quantized checkpoint or another device");
  struct Binder {
    Backend& backend;
    std::map<const void*, Matrix> seen;
    Matrix bind(const Matrix& m) {
      auto it = seen.find(m.data);
      if (it == seen.end()) it = seen.emplace(m.data, backend.bind(m)).first;
      return it->second;
    }
    Vector bind(const Vector& v) { return backend.bind(v); }
  } b{backend, {}};
  ModelWeights out;
  out.embed = b.bind(w.embed);
  out.lm_head = b.bind(w.lm_head);
  out.final_norm = b.bind(w.final_norm);
  for (const LayerWeights& L : w.layers) {
    LayerWeights& o = out.layers.emplace_back();
    o.kind = L.kind;
    o.input_norm = b.bind(L.input_norm);
    o.post_attention_norm = b.bind(L.post_attention_norm);
    if (L.kind == LayerKind::LinearAttention) {
      const GatedDeltaNetWeights& g = L.gdn;
      o.gdn = {b.bind(g.in_qkv), b.bind(g.in_z),      b.bind(g.in_b),    b.bind(g.in_a), b.bind(g.out),
               b.bind(g.conv),   b.bind(g.neg_exp_a), b.bind(g.dt_bias), b.bind(g.norm)};
    } else {
      const AttentionWeights& a = L.attn;
      o.attn = {b.bind(a.q), b.bind(a.k), b.bind(a.v), b.bind(a.o), b.bind(a.q_norm), b.bind(a.k_norm)};
    }
    const MoeWeights& m = L.moe;
    o.moe.router = b.bind(m.router);
    for (const Matrix& x : m.gate) o.moe.gate.push_back(b.bind(x));
    for (const Matrix& x : m.up) o.moe.up.push_back(b.bind(x));
    for (const Matrix& x : m.down) o.moe.down.push_back(b.bind(x));
    o.moe.shared_gate = b.bind(m.shared_gate);
    o.moe.shared_up = b.bind(m.shared_up);
    o.moe.shared_down = b.bind(m.shared_down);
    o.moe.shared_expert_gate = b.bind(m.shared_expert_gate);
  }
  return out;
}

}  // namespace

Qwen35MoeForward::Qwen35MoeForward(const Model& model, std::shared_ptr<Backend> backend)
    : model_(model),
      cfg_(model.config()),
      backend_(backend ? std::move(backend) : make_backend(Device::Cpu)),
      weights_(bound_to(*backend_, model.weights(), model.report().weight_bytes)),
      layout_(state_layout(cfg_)),
      delta_{cfg_.linear_num_key_heads, cfg_.linear_num_value_heads, cfg_.linear_key_head_dim,
             cfg_.linear_value_head_dim, cfg_.linear_conv_kernel, kDeltaChunk, cfg_.gdn_tiled_value_heads},
      attention_{cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim, cfg_.rotary_dim, cfg_.rope_theta} {
  for (const LayerWeights& L : weights_.layers) {
    const MoeWeights& m = L.moe;
    experts_.push_back({&m.router, m.gate, m.up, m.down, &m.shared_gate, &m.shared_up, &m.shared_down,
                        &m.shared_expert_gate});
  }
}

SequenceState Qwen35MoeForward::new_state() const { return SequenceState(backend_->new_state(layout_)); }

void Qwen35MoeForward::check_tokens(std::span<const int32_t> tokens) const {
  const int64_t V = cfg_.vocab_size;
  if (tokens.empty()) throw Error("no tokens to process");
  for (size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] < 0 || tokens[t] >= V)
      throw Error("token id " + std::to_string(tokens[t]) + " at position " + std::to_string(t) +
                  " is outside the vocabulary (0.." + std::to_string(V - 1) + ")");
}

std::vector<float> Qwen35MoeForward::forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) {
  return forward(tokens, state, which, tokens.size() == 1 ? ForwardMode::Decode : ForwardMode::Prompt);
}

std::vector<float> Qwen35MoeForward::forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which,
                                             ForwardMode mode) {
  check_tokens(tokens);
  if (mode == ForwardMode::Decode && tokens.size() != 1)
    throw Error("a decode step takes one token per sequence, not " + std::to_string(tokens.size()));
  const Segment seg{&state, 0, static_cast<int64_t>(tokens.size())};
  return run(tokens, std::span<const Segment>(&seg, 1), mode, which);
}

std::vector<float> Qwen35MoeForward::decode_batch(std::span<const int32_t> tokens,
                                                  std::span<SequenceState* const> states) {
  check_tokens(tokens);
  if (states.size() != tokens.size())
    throw Error("decode_batch: " + std::to_string(tokens.size()) + " tokens for " + std::to_string(states.size()) +
                " sequences");
  std::vector<Segment> segs;
  for (size_t i = 0; i < states.size(); ++i) segs.push_back({states[i], static_cast<int64_t>(i), 1});
  return run(tokens, segs, ForwardMode::Decode, LogitsFor::AllPositions);
}

std::vector<float> Qwen35MoeForward::prefill_batch(std::span<const std::vector<int32_t>> pieces,
                                                   std::span<SequenceState* const> states) {
  if (states.size() != pieces.size())
    throw Error("prefill_batch: " + std::to_string(pieces.size()) + " pieces for " + std::to_string(states.size()) +
                " sequences");
  std::vector<int32_t> tokens;
  std::vector<Segment> segs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    check_tokens(pieces[i]);
    segs.push_back({states[i], static_cast<int64_t>(tokens.size()), static_cast<int64_t>(pieces[i].size())});
    tokens.insert(tokens.end(), pieces[i].begin(), pieces[i].end());
  }
  return run(tokens, segs, ForwardMode::Prompt, LogitsFor::LastOfEachSequence);
}

int32_t Qwen35MoeForward::forward_pick(std::span<const int32_t> tokens, SequenceState& state, ForwardMode mode,
                                       const TokenPick& pick) {
  check_tokens(tokens);
  if (mode == ForwardMode::Decode && tokens.size() != 1)
    throw Error("a decode step takes one token per sequence, not " + std::to_string(tokens.size()));
  const Segment seg{&state, 0, static_cast<int64_t>(tokens.size())};
  const Tensor logits = run_logits(tokens, std::span<const Segment>(&seg, 1), mode, LogitsFor::LastPosition);
  return backend_->pick_tokens(logits, std::span<const TokenPick>(&pick, 1))[0];
}

std::vector<float> Qwen35MoeForward::run(std::span<const int32_t> tokens, std::span<const Segment> segs,
                                         ForwardMode mode, LogitsFor which) {
  return backend_->to_host(run_logits(tokens, segs, mode, which));
}

Tensor Qwen35MoeForward::run_logits(std::span<const int32_t> tokens, std::span<const Segment> segs, ForwardMode mode,
                                    LogitsFor which) {
  std::vector<SeqSlice> seqs;
  for (const Segment& s : segs) seqs.push_back({&s.state->storage(), s.row, s.rows, s.state->position()});
  auto queue = [&] { return queue_logits(tokens, seqs, mode, which); };
  // a decode step may be replayed from a recording (Backend::decode_step)
  Tensor logits = mode == ForwardMode::Decode ? backend_->decode_step(tokens, seqs, this, queue) : queue();
  for (const Segment& s : segs) s.state->advance(s.rows);
  return logits;
}

Tensor Qwen35MoeForward::queue_logits(std::span<const int32_t> tokens, std::span<const SeqSlice> seqs, ForwardMode mode,
                                      LogitsFor which) {
  Backend& B = *backend_;
  const ModelWeights& w = weights_;
  const int64_t T = static_cast<int64_t>(tokens.size()), H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const RowKind kind = kind_of(mode);

  Tensor x = B.embed(w.embed, tokens), h = B.tensor(T, H), out = B.tensor(T, H);
  // each residual add is fused with the norm that reads its sum
  B.rmsnorm(x, w.layers[0].input_norm, eps, h);
  for (int64_t i = 0; i < cfg_.num_layers; ++i) {
    const LayerWeights& L = w.layers[i];
    if (L.kind == LayerKind::LinearAttention)
      gated_delta_net(i, seqs, kind, h, out);
    else
      attention(i, seqs, kind, h, out);
    B.add_rmsnorm(x, out, L.post_attention_norm, eps, h);
    B.moe(h, experts_[i], cfg_.experts_per_token, out, kind);
    if (i + 1 < cfg_.num_layers)
      B.add_rmsnorm(x, out, w.layers[i + 1].input_norm, eps, h);
    else
      B.add(x, out);
  }

  // The rows that get logits. Single rows go through the head as decode
  // tokens do, so a prompt's last logits do not depend on the call's shape.
  std::vector<int64_t> picked;
  if (which == LogitsFor::AllPositions)
    for (int64_t t = 0; t < T; ++t) picked.push_back(t);
  else if (which == LogitsFor::LastPosition)
    picked.push_back(T - 1);
  else
    for (const SeqSlice& s : seqs) picked.push_back(s.row + s.rows - 1);
  const int64_t rows = static_cast<int64_t>(picked.size());
  Tensor last = B.gather(x, picked), normed = B.tensor(rows, H), logits = B.tensor(rows, cfg_.vocab_size);
  B.rmsnorm(last, w.final_norm, eps, normed);
  const bool whole_prompt = which == LogitsFor::AllPositions && rows > 1;
  B.matmul(normed, w.lm_head, logits, whole_prompt ? kind : RowKind::Tokens);
  return logits;
}

void Qwen35MoeForward::gated_delta_net(int64_t layer, std::span<const SeqSlice> seqs, RowKind kind, const Tensor& x,
                                       Tensor& out) {
  Backend& B = *backend_;
  const GatedDeltaNetWeights& g = weights_.layers[layer].gdn;
  const int64_t T = x.rows, C = cfg_.gdn_conv_dim(), VD = cfg_.gdn_value_dim(), Hv = cfg_.linear_num_value_heads;

  Tensor qkv = B.tensor(T, C), z = B.tensor(T, VD), beta = B.wide_tensor(T, Hv), decay = B.wide_tensor(T, Hv);
  const MatmulJob in_proj[] = {{&x, &g.in_qkv, &qkv}, {&x, &g.in_z, &z}, {&x, &g.in_b, &beta}, {&x, &g.in_a, &decay}};
  B.matmul_batch(in_proj, kind);
  Tensor mixed = B.tensor(T, C);
  B.delta_inputs(layer, seqs, qkv, g.conv, g.neg_exp_a, g.dt_bias, delta_, mixed, beta, decay);
  Tensor o = B.tensor(T, VD);
  B.delta_rule(layer, seqs, mixed, decay, beta, delta_, kind, o);
  B.gated_rmsnorm(o, z, g.norm, static_cast<float>(cfg_.rms_norm_eps), o);
  B.matmul(o, g.out, out, kind);
}

void Qwen35MoeForward::attention(int64_t layer, std::span<const SeqSlice> seqs, RowKind kind, const Tensor& x,
                                 Tensor& out) {
  Backend& B = *backend_;
  const AttentionWeights& w = weights_.layers[layer].attn;
  const int64_t T = x.rows, nh = cfg_.num_heads, nkv = cfg_.num_kv_heads, hd = cfg_.head_dim;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  Tensor qg = B.tensor(T, nh * 2 * hd), k = B.tensor(T, nkv * hd), v = B.tensor(T, nkv * hd);
  const MatmulJob in_proj[] = {{&x, &w.q, &qg}, {&x, &w.k, &k}, {&x, &w.v, &v}};
  B.matmul_batch(in_proj, kind);
  Tensor q = B.tensor(T, nh * hd), gate = B.tensor(T, nh * hd);
  B.attention_inputs(qg, k, w.q_norm, w.k_norm, eps, seqs, attention_, q, gate);
  Tensor attn = B.tensor(T, nh * hd);
  B.attention(layer, seqs, q, k, v, attention_, attn);
  B.sigmoid_mul(attn, gate);
  B.matmul(attn, w.o, out, kind);
}

}  // namespace lily
