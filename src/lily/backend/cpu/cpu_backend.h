// The CPU backend: fp32 activations in host memory, weights read in place
// from the mapped checkpoint, the kernels of backend/cpu run under the
// backend's own context (ISA level, thread pool, int8 choice).
// It is the reference every other backend is tested against.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "lily/backend/backend.h"
#include "lily/backend/cpu/cpu_context.h"
#include "lily/backend/cpu/tensor_pool.h"

namespace lily::cpu {

class CpuBackend : public Backend {
 public:
  // The default context: the best ISA (or LILY_CPU_ISA), every hardware thread, float activations.
  CpuBackend();
  explicit CpuBackend(CpuContext context);
  const CpuContext& context() const { return ctx_; }

  Device device() const override { return Device::Cpu; }
  std::string describe() const override;
  double read_bandwidth() override;

  Matrix bind(const Matrix& host) override { return host; }
  Vector bind(const Vector& host) override { return host; }
  std::unique_ptr<StateStorage> new_state(const StateLayout& layout) override;

  Tensor tensor(int64_t rows, int64_t cols) override;
  Tensor from_host(std::span<const float> data, int64_t rows, int64_t cols) override;
  std::vector<float> to_host(const Tensor& t) override;
  Tensor embed(const Matrix& table, std::span<const int32_t> ids) override;
  Tensor gather(const Tensor& x, std::span<const int64_t> rows) override;

  void rmsnorm(const Tensor& x, const Vector& w, float eps, Tensor& y) override;
  void add(Tensor& x, const Tensor& y) override;
  void matmul(const Tensor& x, const Matrix& w, Tensor& y, RowKind kind) override;
  void matmul_batch(std::span<const MatmulJob> jobs, RowKind kind) override;
  void moe(const Tensor& x, const ExpertWeights& w, int64_t k, Tensor& y, RowKind kind) override;

  void conv_silu(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& x, const Vector& w, const DeltaShape& s,
                 Tensor& y) override;
  void delta_gates(Tensor& mixed, Tensor& beta, Tensor& decay, const Vector& neg_exp_a, const Vector& dt_bias,
                   const DeltaShape& s) override;
  void delta_rule(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& mixed, const Tensor& decay,
                  const Tensor& beta, const DeltaShape& s, RowKind kind, Tensor& out) override;
  void gated_rmsnorm(const Tensor& x, const Tensor& z, const Vector& w, float eps, Tensor& y) override;

  void split_query_gate(const Tensor& qg, int64_t heads, int64_t head_dim, Tensor& q, Tensor& gate) override;
  void rope(Tensor& x, int64_t heads, std::span<const SeqSlice> seqs, const AttentionShape& s) override;
  void attention(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttentionShape& s, Tensor& out) override;
  void sigmoid_mul(Tensor& x, const Tensor& gate) override;
  std::vector<int32_t> pick_tokens(const Tensor& logits, std::span<const TokenPick> picks) override;

 private:
  const std::vector<float>& inv_freq(double theta, int64_t rotary_dim);
  void for_rows(int64_t rows, const std::function<void(int64_t, int64_t)>& fn);

  CpuContext ctx_;
  TensorPool pool_{size_t{512} << 20};  // a prompt's activations, reused layer after layer
  std::mutex mu_;
  std::map<std::pair<double, int64_t>, std::vector<float>> inv_freq_;
};

// A CPU sequence state: host vectors per layer.
class CpuState : public StateStorage {
 public:
  struct Layer {
    std::vector<float> keys, values;      // attention: [positions, kv_heads, head_dim]
    std::vector<float> conv, recurrent;   // Gated DeltaNet: [kernel-1, conv_dim] oldest first; [v_heads, dk, dv]
  };
  explicit CpuState(const StateLayout& layout);
  std::unique_ptr<StateStorage> clone() const override { return std::make_unique<CpuState>(*this); }
  void reset() override;
  size_t bytes() const override;
  std::unique_ptr<StateStorage> clone_recurrent() const override;
  void restore_recurrent(const StateStorage& from) override;
  void truncate(int64_t layer, int64_t tokens) override;
  int64_t layer_count() const override { return static_cast<int64_t>(layers_.size()); }
  Layer& layer(int64_t i) { return layers_[static_cast<size_t>(i)]; }

 private:
  std::vector<Layer> layers_;
  size_t kv_row_ = 0;  // floats of one position in an attention cache
};

}  // namespace lily::cpu
