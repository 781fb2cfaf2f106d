#include "lily/model/qwen35moe.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "lily/backend/cpu/attention.h"
#include "lily/backend/cpu/elementwise.h"
#include "lily/backend/cpu/gated_delta.h"
#include "lily/backend/cpu/matmul.h"
#include "lily/backend/cpu/moe.h"
#include "lily/backend/cpu/thread_pool.h"
#include "lily/error.h"

namespace lily {

using Buffer = std::vector<float>;

namespace {
cpu::Rows rows_of(ForwardMode mode) { return mode == ForwardMode::Prompt ? cpu::Rows::Prompt : cpu::Rows::Tokens; }
}  // namespace

Qwen35MoeForward::Qwen35MoeForward(const Model& model)
    : model_(model), cfg_(model.config()), inv_freq_(cpu::rope_inv_freq(cfg_.rope_theta, cfg_.rotary_dim)) {}

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

std::vector<float> Qwen35MoeForward::run(std::span<const int32_t> tokens, std::span<const Segment> segs,
                                         ForwardMode mode, LogitsFor which) {
  const int64_t T = static_cast<int64_t>(tokens.size()), H = cfg_.hidden_size, V = cfg_.vocab_size;
  const ModelWeights& w = model_.weights();
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  Buffer x(T * H), h(T * H), out(T * H);
  cpu::gather_rows(w.embed, tokens.data(), T, x.data());
  for (int64_t i = 0; i < cfg_.num_layers; ++i) {
    const LayerWeights& L = w.layers[i];
    cpu::rmsnorm(x.data(), T, H, L.input_norm.data(), eps, h.data());
    if (L.kind == LayerKind::LinearAttention)
      gated_delta_net(i, segs, mode, h.data(), T, out.data());
    else
      attention(i, segs, mode, h.data(), T, out.data());
    for (int64_t j = 0; j < T * H; ++j) x[j] += out[j];
    cpu::rmsnorm(x.data(), T, H, L.post_attention_norm.data(), eps, h.data());
    cpu::moe_block(h.data(), T, L.moe, cfg_.experts_per_token, out.data(), rows_of(mode));
    for (int64_t j = 0; j < T * H; ++j) x[j] += out[j];
  }
  for (const Segment& s : segs) s.state->advance(s.rows);

  // The rows that get logits. Single rows go through the head as decode
  // tokens do, so a prompt's last logits do not depend on the call's shape.
  std::vector<int64_t> picked;
  if (which == LogitsFor::AllPositions)
    for (int64_t t = 0; t < T; ++t) picked.push_back(t);
  else if (which == LogitsFor::LastPosition)
    picked.push_back(T - 1);
  else
    for (const Segment& s : segs) picked.push_back(s.row + s.rows - 1);
  const int64_t rows = static_cast<int64_t>(picked.size());
  Buffer last(rows * H);
  for (int64_t i = 0; i < rows; ++i) std::copy_n(x.data() + picked[i] * H, H, last.data() + i * H);
  cpu::rmsnorm(last.data(), rows, H, w.final_norm.data(), eps, h.data());
  std::vector<float> logits(static_cast<size_t>(rows * V));
  const bool whole_prompt = which == LogitsFor::AllPositions && rows > 1;
  cpu::matmul(h.data(), rows, w.lm_head, logits.data(), whole_prompt ? rows_of(mode) : cpu::Rows::Tokens);
  return logits;
}

void Qwen35MoeForward::gated_delta_net(int64_t layer, std::span<const Segment> segs, ForwardMode mode,
                                       const float* x, int64_t T, float* out) {
  const GatedDeltaNetWeights& g = model_.weights().layers[layer].gdn;
  const int64_t C = cfg_.gdn_conv_dim(), KD = cfg_.gdn_key_dim(), VD = cfg_.gdn_value_dim();
  const int64_t Hk = cfg_.linear_num_key_heads, Hv = cfg_.linear_num_value_heads;
  const int64_t dk = cfg_.linear_key_head_dim, dv = cfg_.linear_value_head_dim;
  const cpu::Rows rk = rows_of(mode);

  Buffer qkv(T * C), mixed(T * C), z(T * VD), b(T * Hv), a(T * Hv);
  const cpu::Product in_proj[] = {
      {x, &g.in_qkv, qkv.data()}, {x, &g.in_z, z.data()}, {x, &g.in_b, b.data()}, {x, &g.in_a, a.data()}};
  cpu::matmul_batch(in_proj, T, rk);
  for (const Segment& s : segs)
    cpu::causal_conv_silu(qkv.data() + s.row * C, s.rows, C, g.conv.data(), cfg_.linear_conv_kernel,
                          s.state->layer(layer).conv.data(), mixed.data() + s.row * C);

  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int64_t t = 0; t < T; ++t) {
    float* row = mixed.data() + t * C;
    for (int64_t hk = 0; hk < Hk; ++hk) {
      cpu::l2norm_scale(row + hk * dk, dk, 1e-6f, q_scale);
      cpu::l2norm_scale(row + KD + hk * dk, dk, 1e-6f, 1.0f);
    }
    for (int64_t hv = 0; hv < Hv; ++hv) {
      b[t * Hv + hv] = cpu::sigmoid(b[t * Hv + hv]);
      a[t * Hv + hv] = g.neg_exp_a[hv] * cpu::softplus(a[t * Hv + hv] + g.dt_bias[hv]);  // log decay
    }
  }

  Buffer o(T * VD);
  const int64_t group = Hv / Hk;  // v head h reads q/k head h / group
  const int64_t S = static_cast<int64_t>(segs.size());
  // heads of every sequence are independent: each owns its state and its slice of the output
  cpu::ThreadPool::global().parallel_for(S * Hv, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const Segment& s = segs[j / Hv];
      const int64_t hv = j % Hv, hk = hv / group, r = s.row;
      cpu::DeltaHeadInputs in{mixed.data() + r * C + hk * dk, mixed.data() + r * C + KD + hk * dk,
                              mixed.data() + r * C + 2 * KD + hv * dv, a.data() + r * Hv + hv, b.data() + r * Hv + hv,
                              C, C, C, Hv, Hv};
      float* state = s.state->layer(layer).recurrent.data() + hv * dk * dv;
      float* dst = o.data() + r * VD + hv * dv;
      const int64_t p0 = s.state->position();
      if (mode == ForwardMode::Decode)
        cpu::gated_delta_recurrent(in, s.rows, dk, dv, state, dst, VD);
      else
        cpu::gated_delta_chunked(in, s.rows, dk, dv, kDeltaChunk, kDeltaChunk - p0 % kDeltaChunk, state, dst, VD);
    }
  });
  cpu::gated_rmsnorm(o.data(), z.data(), T * Hv, dv, g.norm.data(), static_cast<float>(cfg_.rms_norm_eps), o.data());
  cpu::matmul(o.data(), T, g.out, out, rk);
}

void Qwen35MoeForward::attention(int64_t layer, std::span<const Segment> segs, ForwardMode mode, const float* x,
                                 int64_t T, float* out) {
  const AttentionWeights& w = model_.weights().layers[layer].attn;
  const int64_t nh = cfg_.num_heads, nkv = cfg_.num_kv_heads, hd = cfg_.head_dim;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const cpu::Rows rk = rows_of(mode);

  Buffer qg(T * nh * 2 * hd), q(T * nh * hd), gate(T * nh * hd), k(T * nkv * hd), v(T * nkv * hd);
  const cpu::Product in_proj[] = {{x, &w.q, qg.data()}, {x, &w.k, k.data()}, {x, &w.v, v.data()}};
  cpu::matmul_batch(in_proj, T, rk);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nh; ++h) {
      const float* src = qg.data() + (t * nh + h) * 2 * hd;  // per head [q_h | gate_h]
      std::copy(src, src + hd, q.data() + (t * nh + h) * hd);
      std::copy(src + hd, src + 2 * hd, gate.data() + (t * nh + h) * hd);
    }
  cpu::rmsnorm(q.data(), T * nh, hd, w.q_norm.data(), eps, q.data());
  cpu::rmsnorm(k.data(), T * nkv, hd, w.k_norm.data(), eps, k.data());

  Buffer attn(T * nh * hd);
  for (const Segment& s : segs) {
    LayerState& st = s.state->layer(layer);
    const int64_t p0 = s.state->position();
    for (int64_t t = s.row; t < s.row + s.rows; ++t) {
      cpu::apply_rope(q.data() + t * nh * hd, nh, hd, cfg_.rotary_dim, inv_freq_.data(), p0 + t - s.row);
      cpu::apply_rope(k.data() + t * nkv * hd, nkv, hd, cfg_.rotary_dim, inv_freq_.data(), p0 + t - s.row);
    }
    st.keys.insert(st.keys.end(), k.begin() + s.row * nkv * hd, k.begin() + (s.row + s.rows) * nkv * hd);
    st.values.insert(st.values.end(), v.begin() + s.row * nkv * hd, v.begin() + (s.row + s.rows) * nkv * hd);
    cpu::causal_attention(q.data() + s.row * nh * hd, s.rows, p0, st.keys.data(), st.values.data(), nh, nkv, hd,
                          1.0f / std::sqrt(static_cast<float>(hd)), attn.data() + s.row * nh * hd);
  }
  for (int64_t i = 0; i < T * nh * hd; ++i) attn[i] *= cpu::sigmoid(gate[i]);
  cpu::matmul(attn.data(), T, w.o, out, rk);
}

}  // namespace lily
