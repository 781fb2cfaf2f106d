#include "lily/model/qwen35moe.h"

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

Qwen35MoeForward::Qwen35MoeForward(const Model& model)
    : model_(model), cfg_(model.config()), inv_freq_(cpu::rope_inv_freq(cfg_.rope_theta, cfg_.rotary_dim)) {}

std::vector<float> Qwen35MoeForward::forward(std::span<const int32_t> tokens, SequenceState& state, LogitsFor which) {
  const int64_t T = static_cast<int64_t>(tokens.size()), H = cfg_.hidden_size, V = cfg_.vocab_size;
  if (T == 0) throw Error("no tokens to process");
  for (int64_t t = 0; t < T; ++t)
    if (tokens[t] < 0 || tokens[t] >= V)
      throw Error("token id " + std::to_string(tokens[t]) + " at position " + std::to_string(t) +
                  " is outside the vocabulary (0.." + std::to_string(V - 1) + ")");
  const ModelWeights& w = model_.weights();
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const int64_t p0 = state.position();

  Buffer x(T * H), h(T * H), out(T * H);
  cpu::gather_rows(w.embed, tokens.data(), T, x.data());
  for (int64_t i = 0; i < cfg_.num_layers; ++i) {
    const LayerWeights& L = w.layers[i];
    cpu::rmsnorm(x.data(), T, H, L.input_norm.data(), eps, h.data());
    if (L.kind == LayerKind::LinearAttention)
      gated_delta_net(L, state.layer(i), p0, h.data(), T, out.data());
    else
      attention(L, state.layer(i), p0, h.data(), T, out.data());
    for (int64_t j = 0; j < T * H; ++j) x[j] += out[j];
    cpu::rmsnorm(x.data(), T, H, L.post_attention_norm.data(), eps, h.data());
    cpu::moe_block(h.data(), T, L.moe, cfg_.experts_per_token, out.data());
    for (int64_t j = 0; j < T * H; ++j) x[j] += out[j];
  }
  state.advance(T);

  const int64_t rows = which == LogitsFor::AllPositions ? T : 1;
  const float* last = x.data() + (T - rows) * H;
  cpu::rmsnorm(last, rows, H, w.final_norm.data(), eps, h.data());
  std::vector<float> logits(static_cast<size_t>(rows * V));
  cpu::matmul(h.data(), rows, w.lm_head, logits.data());
  return logits;
}

void Qwen35MoeForward::gated_delta_net(const LayerWeights& L, LayerState& s, int64_t p0, const float* x, int64_t T,
                                       float* out) {
  const GatedDeltaNetWeights& g = L.gdn;
  const int64_t C = cfg_.gdn_conv_dim(), KD = cfg_.gdn_key_dim(), VD = cfg_.gdn_value_dim();
  const int64_t Hk = cfg_.linear_num_key_heads, Hv = cfg_.linear_num_value_heads;
  const int64_t dk = cfg_.linear_key_head_dim, dv = cfg_.linear_value_head_dim;

  Buffer qkv(T * C), mixed(T * C), z(T * VD), b(T * Hv), a(T * Hv);
  cpu::matmul(x, T, g.in_qkv, qkv.data());
  cpu::matmul(x, T, g.in_z, z.data());
  cpu::matmul(x, T, g.in_b, b.data());
  cpu::matmul(x, T, g.in_a, a.data());
  cpu::causal_conv_silu(qkv.data(), T, C, g.conv.data(), cfg_.linear_conv_kernel, s.conv.data(), mixed.data());

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
  // heads are independent: each owns its state and its slice of the output
  cpu::ThreadPool::global().parallel_for(Hv, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t hv = h0; hv < h1; ++hv) {
      const int64_t hk = hv / group;
      cpu::DeltaHeadInputs in{mixed.data() + hk * dk, mixed.data() + KD + hk * dk, mixed.data() + 2 * KD + hv * dv,
                              a.data() + hv, b.data() + hv, C, C, C, Hv, Hv};
      float* state = s.recurrent.data() + hv * dk * dv;
      if (T == 1)
        cpu::gated_delta_recurrent(in, T, dk, dv, state, o.data() + hv * dv, VD);
      else
        cpu::gated_delta_chunked(in, T, dk, dv, kDeltaChunk, kDeltaChunk - p0 % kDeltaChunk, state, o.data() + hv * dv,
                                 VD);
    }
  });
  cpu::gated_rmsnorm(o.data(), z.data(), T * Hv, dv, g.norm.data(), static_cast<float>(cfg_.rms_norm_eps), o.data());
  cpu::matmul(o.data(), T, g.out, out);
}

void Qwen35MoeForward::attention(const LayerWeights& L, LayerState& s, int64_t p0, const float* x, int64_t T,
                                 float* out) {
  const AttentionWeights& w = L.attn;
  const int64_t nh = cfg_.num_heads, nkv = cfg_.num_kv_heads, hd = cfg_.head_dim;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  Buffer qg(T * nh * 2 * hd), q(T * nh * hd), gate(T * nh * hd), k(T * nkv * hd), v(T * nkv * hd);
  cpu::matmul(x, T, w.q, qg.data());
  cpu::matmul(x, T, w.k, k.data());
  cpu::matmul(x, T, w.v, v.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nh; ++h) {
      const float* src = qg.data() + (t * nh + h) * 2 * hd;  // per head [q_h | gate_h]
      std::copy(src, src + hd, q.data() + (t * nh + h) * hd);
      std::copy(src + hd, src + 2 * hd, gate.data() + (t * nh + h) * hd);
    }
  cpu::rmsnorm(q.data(), T * nh, hd, w.q_norm.data(), eps, q.data());
  cpu::rmsnorm(k.data(), T * nkv, hd, w.k_norm.data(), eps, k.data());
  for (int64_t t = 0; t < T; ++t) {
    cpu::apply_rope(q.data() + t * nh * hd, nh, hd, cfg_.rotary_dim, inv_freq_.data(), p0 + t);
    cpu::apply_rope(k.data() + t * nkv * hd, nkv, hd, cfg_.rotary_dim, inv_freq_.data(), p0 + t);
  }
  s.keys.insert(s.keys.end(), k.begin(), k.end());
  s.values.insert(s.values.end(), v.begin(), v.end());

  Buffer attn(T * nh * hd);
  cpu::causal_attention(q.data(), T, p0, s.keys.data(), s.values.data(), nh, nkv, hd,
                        1.0f / std::sqrt(static_cast<float>(hd)), attn.data());
  for (int64_t i = 0; i < T * nh * hd; ++i) attn[i] *= cpu::sigmoid(gate[i]);
  cpu::matmul(attn.data(), T, w.o, out);
}

}  // namespace lily
