#include "lily/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "lily/backend/cpu/attention.h"
#include "lily/backend/cpu/elementwise.h"
#include "lily/backend/cpu/gated_delta.h"
#include "lily/backend/cpu/matmul.h"
#include "lily/backend/cpu/moe.h"
#include "lily/backend/cpu/read_bandwidth.h"
#include "lily/backend/token_pick.h"
#include "lily/backend/cpu/thread_pool.h"
#include "lily/error.h"

namespace lily::cpu {

namespace {

Rows rows_of(RowKind k) { return k == RowKind::Prompt ? Rows::Prompt : Rows::Tokens; }

CpuState& state_of(const SeqSlice& s) { return static_cast<CpuState&>(*s.state); }

void need_same_rows(const Tensor& a, const Tensor& b, const char* op) {
  if (a.rows != b.rows) throw Error(std::string(op) + ": " + std::to_string(a.rows) + " rows against " +
                                    std::to_string(b.rows));
}

}  // namespace

CpuState::CpuState(const StateLayout& l)
    : layers_(l.delta_layer.size()), kv_row_(static_cast<size_t>(l.kv_heads * l.head_dim)) {
  for (size_t i = 0; i < layers_.size(); ++i)
    if (l.delta_layer[i]) {
      layers_[i].conv.assign(static_cast<size_t>(l.conv_rows * l.conv_dim), 0.0f);
      layers_[i].recurrent.assign(static_cast<size_t>(l.value_heads * l.key_dim * l.value_dim), 0.0f);
    }
}

void CpuState::reset() {
  for (Layer& l : layers_) {
    l.keys.clear();
    l.values.clear();
    std::fill(l.conv.begin(), l.conv.end(), 0.0f);
    std::fill(l.recurrent.begin(), l.recurrent.end(), 0.0f);
  }
}

size_t CpuState::bytes() const {
  size_t n = sizeof(CpuState);
  for (const Layer& l : layers_)
    n += (l.keys.size() + l.values.size() + l.conv.size() + l.recurrent.size()) * sizeof(float);
  return n;
}

std::unique_ptr<StateStorage> CpuState::clone_recurrent() const {
  auto c = std::make_unique<CpuState>(StateLayout{});
  c->layers_.resize(layers_.size());
  c->kv_row_ = kv_row_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    c->layers_[i].conv = layers_[i].conv;
    c->layers_[i].recurrent = layers_[i].recurrent;
  }
  return c;
}

void CpuState::restore_recurrent(const StateStorage& from) {
  const auto* f = dynamic_cast<const CpuState*>(&from);
  if (f == nullptr || f->layers_.size() != layers_.size())
    throw Error("restore_recurrent: not a snapshot of a CPU state of this model");
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (f->layers_[i].conv.size() != layers_[i].conv.size() ||
        f->layers_[i].recurrent.size() != layers_[i].recurrent.size())
      throw Error("restore_recurrent: layer " + std::to_string(i) + " does not match");
    std::copy(f->layers_[i].conv.begin(), f->layers_[i].conv.end(), layers_[i].conv.begin());
    std::copy(f->layers_[i].recurrent.begin(), f->layers_[i].recurrent.end(), layers_[i].recurrent.begin());
  }
}

void CpuState::truncate(int64_t layer, int64_t tokens) {
  if (layer < 0 || layer >= static_cast<int64_t>(layers_.size()) || tokens < 0)
    throw Error("truncate: no layer " + std::to_string(layer) + " or a negative length");
  Layer& l = layers_[static_cast<size_t>(layer)];
  const size_t n = static_cast<size_t>(tokens) * kv_row_;
  if (n > l.keys.size())
    throw Error("truncate: layer " + std::to_string(layer) + " holds fewer than " + std::to_string(tokens) + " positions");
  l.keys.resize(n);
  l.values.resize(n);
}

CpuBackend::CpuBackend() : CpuBackend(make_cpu_context()) {}

CpuBackend::CpuBackend(CpuContext context) : ctx_(std::move(context)) {
  if (!ctx_.pool) throw Error("CpuBackend: the context has no thread pool");
}

std::string CpuBackend::describe() const { return "cpu (" + ctx_.describe() + ")"; }

double CpuBackend::read_bandwidth() { return measure_read_bandwidth(ctx_.threads(), size_t{1} << 30, 5); }

std::unique_ptr<StateStorage> CpuBackend::new_state(const StateLayout& layout) {
  return std::make_unique<CpuState>(layout);
}

Tensor CpuBackend::tensor(int64_t rows, int64_t cols) {
  std::shared_ptr<float> storage = pool_.take(static_cast<size_t>(rows * cols));
  Tensor t;
  t.rows = rows;
  t.cols = cols;
  t.data = storage.get();
  t.owner = std::move(storage);
  return t;
}

Tensor CpuBackend::from_host(std::span<const float> data, int64_t rows, int64_t cols) {
  if (static_cast<int64_t>(data.size()) != rows * cols) throw Error("from_host: the data is not [rows, cols]");
  Tensor t = tensor(rows, cols);
  std::copy(data.begin(), data.end(), t.f32());
  return t;
}

std::vector<float> CpuBackend::to_host(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

Tensor CpuBackend::embed(const Matrix& table, std::span<const int32_t> ids) {
  Tensor x = tensor(static_cast<int64_t>(ids.size()), table.cols);
  gather_rows(ctx_.isa, table, ids.data(), x.rows, x.f32());
  return x;
}

Tensor CpuBackend::gather(const Tensor& x, std::span<const int64_t> rows) {
  Tensor out = tensor(static_cast<int64_t>(rows.size()), x.cols);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(x.f32() + rows[i] * x.cols, x.cols, out.f32() + static_cast<int64_t>(i) * x.cols);
  return out;
}

// A prompt's rows of a row-wise op on every thread (a decode step's one row on the caller's).
void CpuBackend::for_rows(int64_t rows, const std::function<void(int64_t, int64_t)>& fn) {
  ctx_.threads().parallel_for(rows, 32, fn);
}

void CpuBackend::rmsnorm(const Tensor& x, const Vector& w, float eps, Tensor& y) {
  const int64_t dim = static_cast<int64_t>(w.size());
  for_rows(x.numel() / dim, [&](int64_t r0, int64_t r1) {
    cpu::rmsnorm(x.f32() + r0 * dim, r1 - r0, dim, w.data(), eps, y.f32() + r0 * dim);
  });
}

void CpuBackend::add(Tensor& x, const Tensor& y) {
  float* a = x.f32();
  const float* b = y.f32();
  for_rows(x.rows, [&](int64_t r0, int64_t r1) {
    for (int64_t j = r0 * x.cols; j < r1 * x.cols; ++j) a[j] += b[j];
  });
}

void CpuBackend::matmul(const Tensor& x, const Matrix& w, Tensor& y, RowKind kind) {
  cpu::matmul(ctx_, x.f32(), x.rows, w, y.f32(), rows_of(kind));
}

void CpuBackend::matmul_batch(std::span<const MatmulJob> jobs, RowKind kind) {
  std::vector<Product> products;
  for (const MatmulJob& j : jobs) products.push_back({j.x->f32(), j.w, j.y->f32()});
  if (!jobs.empty()) cpu::matmul_batch(ctx_, products, jobs[0].x->rows, rows_of(kind));
}

void CpuBackend::moe(const Tensor& x, const ExpertWeights& w, int64_t k, Tensor& y, RowKind kind) {
  moe_block(ctx_, x.f32(), x.rows, w, k, y.f32(), rows_of(kind), route_log_);
}

void CpuBackend::conv_silu(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& x, const Vector& w,
                           const DeltaShape& s, Tensor& y) {
  const int64_t C = x.cols;
  for (const SeqSlice& q : seqs)
    causal_conv_silu(ctx_, x.f32() + q.row * C, q.rows, C, w.data(), s.conv_kernel, state_of(q).layer(layer).conv.data(),
                     y.f32() + q.row * C);
}

void CpuBackend::delta_gates(Tensor& mixed, Tensor& beta, Tensor& decay, const Vector& neg_exp_a,
                             const Vector& dt_bias, const DeltaShape& s) {
  const int64_t T = mixed.rows, C = mixed.cols, Hk = s.key_heads, Hv = s.value_heads, dk = s.key_dim;
  const int64_t KD = Hk * dk;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  float *b = beta.f32(), *a = decay.f32();
  for_rows(T, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = mixed.f32() + t * C;
      for (int64_t hk = 0; hk < Hk; ++hk) {
        l2norm_scale(row + hk * dk, dk, 1e-6f, q_scale);
        l2norm_scale(row + KD + hk * dk, dk, 1e-6f, 1.0f);
      }
      for (int64_t hv = 0; hv < Hv; ++hv) {
        b[t * Hv + hv] = sigmoid(b[t * Hv + hv]);
        a[t * Hv + hv] = neg_exp_a[hv] * softplus(a[t * Hv + hv] + dt_bias[hv]);  // log decay
      }
    }
  });
}

void CpuBackend::delta_rule(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& mixed, const Tensor& decay,
                            const Tensor& beta, const DeltaShape& s, RowKind kind, Tensor& out) {
  const int64_t C = mixed.cols, Hk = s.key_heads, Hv = s.value_heads, dk = s.key_dim, dv = s.value_dim;
  const int64_t KD = Hk * dk, VD = Hv * dv;
  const int64_t S = static_cast<int64_t>(seqs.size());
  const float *m = mixed.f32(), *a = decay.f32(), *b = beta.f32();
  float* o = out.f32();
  // heads of every sequence are independent: each owns its state and its slice of the output
  ctx_.threads().parallel_for(S * Hv, 1, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const SeqSlice& q = seqs[j / Hv];
      const int64_t hv = j % Hv, hk = s.key_head_of(hv), r = q.row;
      DeltaHeadInputs in{m + r * C + hk * dk, m + r * C + KD + hk * dk, m + r * C + 2 * KD + hv * dv,
                         a + r * Hv + hv,     b + r * Hv + hv,          C, C, C, Hv, Hv};
      float* state = state_of(q).layer(layer).recurrent.data() + hv * dk * dv;
      float* dst = o + r * VD + hv * dv;
      if (kind == RowKind::Tokens)
        gated_delta_recurrent(ctx_.isa, in, q.rows, dk, dv, state, dst, VD);
      else
        gated_delta_chunked(ctx_.isa, in, q.rows, dk, dv, s.chunk, s.chunk - q.position % s.chunk, state, dst, VD);
    }
  });
}

void CpuBackend::gated_rmsnorm(const Tensor& x, const Tensor& z, const Vector& w, float eps, Tensor& y) {
  const int64_t dim = static_cast<int64_t>(w.size());
  for_rows(x.numel() / dim, [&](int64_t r0, int64_t r1) {
    cpu::gated_rmsnorm(x.f32() + r0 * dim, z.f32() + r0 * dim, r1 - r0, dim, w.data(), eps, y.f32() + r0 * dim);
  });
}

void CpuBackend::split_query_gate(const Tensor& qg, int64_t heads, int64_t hd, Tensor& q, Tensor& gate) {
  for (int64_t t = 0; t < qg.rows; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const float* src = qg.f32() + (t * heads + h) * 2 * hd;  // per head [q_h | gate_h]
      std::copy(src, src + hd, q.f32() + (t * heads + h) * hd);
      std::copy(src + hd, src + 2 * hd, gate.f32() + (t * heads + h) * hd);
    }
}

const std::vector<float>& CpuBackend::inv_freq(double theta, int64_t rotary_dim) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(theta, rotary_dim);
  auto it = inv_freq_.find(key);
  if (it == inv_freq_.end()) it = inv_freq_.emplace(key, rope_inv_freq(theta, rotary_dim)).first;
  return it->second;
}

void CpuBackend::rope(Tensor& x, int64_t heads, std::span<const SeqSlice> seqs, const AttentionShape& s) {
  const float* f = inv_freq(s.rope_theta, s.rotary_dim).data();
  const int64_t hd = s.head_dim;
  for (const SeqSlice& q : seqs)
    for (int64_t t = q.row; t < q.row + q.rows; ++t)
      apply_rope(x.f32() + t * heads * hd, heads, hd, s.rotary_dim, f, q.position + t - q.row);
}

void CpuBackend::attention(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& q, const Tensor& k,
                           const Tensor& v, const AttentionShape& s, Tensor& out) {
  need_same_rows(q, k, "attention");
  const int64_t nh = s.heads, nkv = s.kv_heads, hd = s.head_dim;
  for (const SeqSlice& sq : seqs) {
    CpuState::Layer& st = state_of(sq).layer(layer);
    const float *kr = k.f32() + sq.row * nkv * hd, *vr = v.f32() + sq.row * nkv * hd;
    st.keys.insert(st.keys.end(), kr, kr + sq.rows * nkv * hd);
    st.values.insert(st.values.end(), vr, vr + sq.rows * nkv * hd);
    causal_attention(ctx_, q.f32() + sq.row * nh * hd, sq.rows, sq.position, st.keys.data(), st.values.data(), nh, nkv, hd,
                     1.0f / std::sqrt(static_cast<float>(hd)), out.f32() + sq.row * nh * hd);
  }
}

void CpuBackend::sigmoid_mul(Tensor& x, const Tensor& gate) {
  float* a = x.f32();
  const float* g = gate.f32();
  for (int64_t i = 0; i < x.numel(); ++i) a[i] *= sigmoid(g[i]);
}

std::vector<int32_t> CpuBackend::pick_tokens(const Tensor& logits, std::span<const TokenPick> picks) {
  if (static_cast<int64_t>(picks.size()) != logits.rows)
    throw Error("pick_tokens: " + std::to_string(picks.size()) + " picks for " + std::to_string(logits.rows) + " rows");
  std::vector<int32_t> out;
  for (int64_t r = 0; r < logits.rows; ++r)
    out.push_back(pick_token(std::span<const float>(logits.f32() + r * logits.cols, static_cast<size_t>(logits.cols)),
                             picks[static_cast<size_t>(r)]));
  return out;
}

}  // namespace lily::cpu
