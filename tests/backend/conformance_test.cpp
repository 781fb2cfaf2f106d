// Every backend against the CPU reference, as llama.cpp's test-backend-ops
// does: each operation on random inputs of awkward sizes, for every weight
// format (F32, F16, BF16, MLX affine 4/6/8-bit, GGUF blocks), within a tolerance derived
// from fp32 accumulation; then whole models on the fixtures, with the
// reference's expert choices replayed (tiny random models route chaotically),
// greedy steps where the top-1 margin decides them, batched equal to alone
// and a resumed prefix equal to a fresh prompt.
//
// The reference is the CPU backend at its portable kernels with float
// activations. The backends under test: the GPU (skipped where there is
// none), and the CPU at every other ISA level this machine has, with float
// activations and, where the level has an int8 kernel, with int8 ones (lossy:
// held to the rounding of their inputs). The GPU runs with bf16 activations
// (each op held to its own rounding) and with fp32 ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <tuple>

#include "lily/backend/backend_factory.h"
#include "lily/backend/cpu/cpu_backend.h"
#include "lily/backend/cpu/int8_dot.h"
#include "lily/model/model.h"
#include "lily/model/qwen35moe.h"
#include "lily/quant/affine.h"
#include "lily/quant/gguf_quantize.h"
#include "support/int8_bound.h"
#include "support/test_support.h"

namespace lily {
namespace {

// fp32 accumulation of n products, in any order: a few units in the last
// place per term, relative to the largest magnitude of the result.
double fp32_tolerance(int64_t n) { return 8.0 * static_cast<double>(n) * 1.2e-7 + 1e-6; }

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double scale = std::max(1.0, max_abs(want));
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= worst)) worst = d, at = i;  // NaN counts as the worst
  }
  EXPECT_LE(worst, rel * scale) << what << ": element " << at << " is " << got[at] << ", the CPU gives " << want[at];
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A host matrix with its storage, in one of the formats checkpoints hold.
struct HostMatrix {
  std::vector<uint8_t> data, scales, biases;
  Matrix m;
};

// MLX affine 4/6/8-bit, then GGUF block formats as `lily quantize --gguf` writes them.
enum class Format { F32, F16, BF16, Q4, Q6, Q8, GgufQ4_0, GgufQ8_0, GgufQ4_K, GgufQ6_K };
const char* name_of(Format f) {
  const char* n[] = {"F32", "F16", "BF16", "Q4", "Q6", "Q8", "GGUF Q4_0", "GGUF Q8_0", "GGUF Q4_K", "GGUF Q6_K"};
  return n[static_cast<int>(f)];
}
bool gguf_format(Format f) { return f >= Format::GgufQ4_0; }
GgmlType ggml_type_of(Format f) {
  return f == Format::GgufQ4_0 ? GgmlType::Q4_0 : f == Format::GgufQ8_0 ? GgmlType::Q8_0
                                                : f == Format::GgufQ4_K ? GgmlType::Q4_K : GgmlType::Q6_K;
}

HostMatrix make_matrix(Format f, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> w = random_floats(static_cast<size_t>(rows * cols), seed, -0.5f, 0.5f);
  HostMatrix h;
  h.m.rows = rows;
  h.m.cols = cols;
  auto put16 = [&](std::vector<uint8_t>& out, const std::vector<float>& v, bool bf16) {
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t x = bf16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
      std::memcpy(out.data() + 2 * i, &x, 2);
    }
  };
  if (f == Format::F32) {
    h.data.resize(w.size() * 4);
    std::memcpy(h.data.data(), w.data(), h.data.size());
    h.m.dtype = DType::F32;
  } else if (f == Format::F16 || f == Format::BF16) {
    put16(h.data, w, f == Format::BF16);
    h.m.dtype = f == Format::BF16 ? DType::BF16 : DType::F16;
  } else if (gguf_format(f)) {
    const std::string blocks = quant::quantize_gguf(ggml_type_of(f), w.data(), rows, cols);
    h.data.assign(blocks.begin(), blocks.end());
    h.m.dtype = DType::U8;
    h.m.ggml_type = static_cast<int>(ggml_type_of(f));
  } else {
    const int bits = f == Format::Q4 ? 4 : f == Format::Q6 ? 6 : 8, gs = f == Format::Q8 ? 32 : 64;
    quant::QuantizedRows q = quant::quantize(w.data(), rows, cols, bits, gs);
    h.data = q.packed;
    put16(h.scales, q.scales, true);
    put16(h.biases, q.biases, true);
    h.m.bits = bits;
    h.m.group_size = gs;
    h.m.scale_dtype = DType::BF16;
    h.m.scales = h.scales.data();
    h.m.biases = h.biases.data();
  }
  h.m.data = h.data.data();
  return h;
}

// A backend under test: "cuda", or "cpu_<isa>" with "_int8" for int8 activations.
struct Candidate {
  std::string name;
  Device device = Device::Cpu;
  cpu::Isa isa = cpu::Isa::Portable;
  bool int8 = false;
  bool bf16 = false;  // GPU activations in bf16 (fp32 otherwise)
};

// gtest prints parameters in test names and failures: the name, not the bytes.
void PrintTo(const Candidate& c, std::ostream* os) { *os << c.name; }

std::vector<Candidate> candidates() {
  std::vector<Candidate> out = {{"cuda", Device::Cuda, cpu::Isa::Portable, false, true},
                                {"cuda_f32", Device::Cuda}};
  for (cpu::Isa isa : cpu::isas_here()) {
    if (isa == cpu::Isa::Portable) continue;  // the reference itself
    // the float kernels of VNNI and AMX levels are AVX-512's: those levels differ by their int8 paths
    if (isa < cpu::Isa::Avx512Vnni) out.push_back({std::string("cpu_") + cpu::isa_name(isa), Device::Cpu, isa, false});
    out.push_back({std::string("cpu_") + cpu::isa_name(isa) + "_int8", Device::Cpu, isa, true});
  }
  return out;
}

// The reference and one backend under test, for a parameter that names the candidate.
template <class Param>
class AgainstTheReference : public ::testing::TestWithParam<Param> {
 protected:
  virtual const Candidate& candidate() const = 0;
  void SetUp() override {
    const Candidate& c = candidate();
    if (c.device == Device::Cuda) {
      std::string why;
      if (!device_available(Device::Cuda, &why)) GTEST_SKIP() << "no GPU backend here: " << why;
      BackendOptions o;
      o.float_activations = !c.bf16;
      dut_ = make_backend(Device::Cuda, o);
    } else {
      dut_ = std::make_shared<cpu::CpuBackend>(test::cpu_context(c.isa, c.int8));
    }
  }
  // Inputs for both backends, rounded to bf16 first where the one under test
  // keeps bf16 activations, so that both compute on the same values.
  Tensor on(Backend& b, const std::vector<float>& v, int64_t rows, int64_t cols) const {
    if (!candidate().bf16) return b.from_host(v, rows, cols);
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float(float_to_bf16(v[i]));
    return b.from_host(r, rows, cols);
  }
  // After an op is compared, the reference continues from the output under
  // test (bf16-rounded), so each op is held to its own error, not the sum of those before.
  void resync(Tensor& ref, const Tensor& under_test) {
    if (candidate().bf16) ref = cpu_.from_host(dut_->to_host(under_test), under_test.rows, under_test.cols);
  }
  // An op's tolerance: fp32 accumulation, plus `roundings` roundings of an output to bf16 (2^-9 of it each).
  double tol(double fp32, int roundings = 1) const { return fp32 + (candidate().bf16 ? roundings * 0x1p-8 : 0.0); }
  bool lossy() const { return candidate().int8 || candidate().bf16; }
  // The kind a product of T rows is run as: the CPU's own choice (decode
  // tokens take the int8 path); the GPU's prompt kernels for any T.
  RowKind kind_under_test(int64_t T) const {
    return candidate().device == Device::Cuda || T > 1 ? RowKind::Prompt : RowKind::Tokens;
  }

  std::shared_ptr<cpu::CpuBackend> ref_ = std::make_shared<cpu::CpuBackend>(test::cpu_context(cpu::Isa::Portable));
  cpu::CpuBackend& cpu_ = *ref_;
  std::shared_ptr<Backend> dut_;
};

class Conformance : public AgainstTheReference<Candidate> {
 protected:
  const Candidate& candidate() const override { return GetParam(); }
  void check_attention(const AttentionShape& s, std::span<const std::pair<int64_t, int64_t>> calls);
  void check_delta(const DeltaShape& s);
  void check_moe(int64_t E, int64_t k, int64_t H, int64_t I, int64_t Is, std::span<const Format> formats);
};

TEST_P(Conformance, MatmulInEveryWeightFormat) {
  // awkward sizes, then the model's hidden width (the GPU's eight-a-load kernels at every token tiling)
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 192}, {40, 2048}})
  for (Format f : {Format::F32, Format::F16, Format::BF16, Format::Q4, Format::Q6, Format::Q8, Format::GgufQ4_0,
                   Format::GgufQ8_0, Format::GgufQ4_K, Format::GgufQ6_K})
    for (int64_t T : {1, 3, 6, 9}) {
      int64_t block = 1, block_bytes = 1;
      if (gguf_format(f)) ggml_block_layout(ggml_type_of(f), &block, &block_bytes);
      if (cols % block != 0) continue;
      // the CPU's int8 GGUF products round their inputs as llama.cpp's do: held by the GGUF int8 tests
      if (gguf_format(f) && candidate().int8) continue;
      HostMatrix h = make_matrix(f, rows, cols, 7 + static_cast<uint32_t>(T + cols));
      const std::vector<float> x = random_floats(static_cast<size_t>(T * cols), 11);
      Tensor yc = cpu_.tensor(T, rows), yg = dut_->tensor(T, rows);
      cpu_.matmul(on(cpu_, x, T, cols), h.m, yc, T == 1 ? RowKind::Tokens : RowKind::Prompt);
      const Matrix dev = dut_->bind(h.m);
      EXPECT_EQ(dev.device, candidate().device);
      dut_->matmul(on(*dut_, x, T, cols), dev, yg, kind_under_test(T));
      const std::string what =
          std::string("matmul ") + name_of(f) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " T=" + std::to_string(T);
      if (candidate().int8 && cpu::int8::packed_format(h.m)) {  // int8 decode rows, or AMX prompt tiles
        EXPECT_TRUE(test::within_int8_rounding(h.m, x.data(), T, dut_->to_host(yg).data())) << what;
      } else {
        expect_close(dut_->to_host(yg), cpu_.to_host(yc), tol(fp32_tolerance(cols)), what);
      }
      // embedding rows dequantize exactly as the CPU does
      const std::vector<int32_t> ids = {3, 0, 36, 3};
      expect_close(dut_->to_host(dut_->embed(dev, ids)), cpu_.to_host(cpu_.embed(h.m, ids)), tol(1e-7),
                   std::string("embed ") + name_of(f));
    }
}

TEST_P(Conformance, NormsAndElementwise) {
  const int64_t T = 5, H = 72, heads = 3, hd = 24;
  const auto x = random_floats(T * H, 1), z = random_floats(T * H, 2), w = random_floats(hd, 3, 0.5f, 1.5f);
  const Vector wv = w, wg = dut_->bind(wv);
  for (bool gated : {false, true}) {
    Tensor yc = cpu_.tensor(T, H), yg = dut_->tensor(T, H);
    if (gated) {
      cpu_.gated_rmsnorm(on(cpu_, x, T, H), on(cpu_, z, T, H), wv, 1e-6f, yc);
      dut_->gated_rmsnorm(on(*dut_, x, T, H), on(*dut_, z, T, H), wg, 1e-6f, yg);
    } else {
      cpu_.rmsnorm(on(cpu_, x, T, H), wv, 1e-6f, yc);
      dut_->rmsnorm(on(*dut_, x, T, H), wg, 1e-6f, yg);
    }
    expect_close(dut_->to_host(yg), cpu_.to_host(yc), tol(fp32_tolerance(hd)), gated ? "gated_rmsnorm" : "rmsnorm");
  }
  Tensor ac = on(cpu_, x, T, H), ag = on(*dut_, x, T, H);
  cpu_.add(ac, on(cpu_, z, T, H));
  dut_->add(ag, on(*dut_, z, T, H));
  expect_close(dut_->to_host(ag), cpu_.to_host(ac), tol(1e-7), "add");
  resync(ac, ag);
  cpu_.sigmoid_mul(ac, on(cpu_, z, T, H));
  dut_->sigmoid_mul(ag, on(*dut_, z, T, H));
  expect_close(dut_->to_host(ag), cpu_.to_host(ac), tol(1e-6), "sigmoid_mul");
  const auto qg = random_floats(T * heads * 2 * hd, 4);
  Tensor qc = cpu_.tensor(T, heads * hd), gc = cpu_.tensor(T, heads * hd);
  Tensor qgg = dut_->tensor(T, heads * hd), ggg = dut_->tensor(T, heads * hd);
  cpu_.split_query_gate(on(cpu_, qg, T, 2 * heads * hd), heads, hd, qc, gc);
  dut_->split_query_gate(on(*dut_, qg, T, 2 * heads * hd), heads, hd, qgg, ggg);
  expect_close(dut_->to_host(qgg), cpu_.to_host(qc), 0, "split q");
  expect_close(dut_->to_host(ggg), cpu_.to_host(gc), 0, "split gate");
}

// Two sequences in one call, at different positions, through every op that keeps state.
struct Pair {
  std::unique_ptr<StateStorage> a, b;
  std::vector<SeqSlice> seqs(int64_t pa, int64_t ra, int64_t pb, int64_t rb) {
    return {{a.get(), 0, ra, pa}, {b.get(), ra, rb, pb}};
  }
};

// Rope and attention of two sequences over their caches, call by call
// (rows of each sequence per call), then one more sequence given all of the
// first's rows in a single call: its last row must equal the first's exactly
// (a row's result does not depend on what shares its call).
void Conformance::check_attention(const AttentionShape& s, std::span<const std::pair<int64_t, int64_t>> calls) {
  StateLayout layout;
  layout.delta_layer = {false};
  layout.kv_heads = s.kv_heads;
  layout.head_dim = s.head_dim;
  Pair c{cpu_.new_state(layout), cpu_.new_state(layout)}, g{dut_->new_state(layout), dut_->new_state(layout)};
  const int64_t qd = s.heads * s.head_dim, kd = s.kv_heads * s.head_dim;
  std::vector<float> all_q, all_k, all_v, last_row;
  int64_t pa = 0, pb = 0;
  for (auto [ra, rb] : calls) {
    const int64_t T = ra + rb;
    const auto q = random_floats(T * qd, 10 + T + pa), k = random_floats(T * kd, 20 + T + pa),
               v = random_floats(T * kd, 30 + T + pa);
    Tensor qc = on(cpu_, q, T, qd), kc = on(cpu_, k, T, kd), vc = on(cpu_, v, T, kd), oc = cpu_.tensor(T, qd);
    Tensor qg = on(*dut_, q, T, qd), kg = on(*dut_, k, T, kd), vg = on(*dut_, v, T, kd), og = dut_->tensor(T, qd);
    all_q.insert(all_q.end(), q.begin(), q.begin() + ra * qd);
    all_k.insert(all_k.end(), k.begin(), k.begin() + ra * kd);
    all_v.insert(all_v.end(), v.begin(), v.begin() + ra * kd);
    const auto sc = c.seqs(pa, ra, pb, rb), sg = g.seqs(pa, ra, pb, rb);
    cpu_.rope(qc, s.heads, sc, s);
    cpu_.rope(kc, s.kv_heads, sc, s);
    dut_->rope(qg, s.heads, sg, s);
    dut_->rope(kg, s.kv_heads, sg, s);
    expect_close(dut_->to_host(qg), cpu_.to_host(qc), tol(1e-5), "rope");
    expect_close(dut_->to_host(kg), cpu_.to_host(kc), tol(1e-5), "rope (keys)");
    resync(qc, qg);
    resync(kc, kg);
    cpu_.attention(0, sc, qc, kc, vc, s, oc);
    dut_->attention(0, sg, qg, kg, vg, s, og);
    const std::vector<float> got = dut_->to_host(og);
    expect_close(got, cpu_.to_host(oc), tol(fp32_tolerance(s.head_dim * (pa + pb + T))),
                 "attention at " + std::to_string(pa) + " and " + std::to_string(pb));
    last_row.assign(got.begin() + (ra - 1) * qd, got.begin() + ra * qd);
    pa += ra;
    pb += rb;
  }
  std::unique_ptr<StateStorage> whole = dut_->new_state(layout);
  const std::vector<SeqSlice> one = {{whole.get(), 0, pa, 0}};
  Tensor q = on(*dut_, all_q, pa, qd), k = on(*dut_, all_k, pa, kd), o = dut_->tensor(pa, qd);
  dut_->rope(q, s.heads, one, s);
  dut_->rope(k, s.kv_heads, one, s);
  dut_->attention(0, one, q, k, on(*dut_, all_v, pa, kd), s, o);
  const std::vector<float> got = dut_->to_host(o);
  EXPECT_TRUE(std::equal(last_row.begin(), last_row.end(), got.end() - qd))
      << "the last of " << pa << " rows in one call differs from the same row in its own call";
}

TEST_P(Conformance, RopeAndAttentionOverTheCache) {
  const std::pair<int64_t, int64_t> calls[] = {{5, 3}, {1, 1}, {2, 7}};
  check_attention(AttentionShape{4, 2, 32, 16, 10000.0}, calls);
}

// The model's attention (16 query heads on 2 KV heads of 256, rotary 64): a
// prompt, then decode steps whose context is split over several spans on the GPU.
TEST_P(Conformance, AttentionAtTheModelsShape) {
  const std::pair<int64_t, int64_t> calls[] = {{300, 3}, {1, 1}, {1, 1}};
  check_attention(AttentionShape{16, 2, 256, 64, 10000000.0}, calls);
}

// The attention's inputs in one call (attention_inputs) against the ops
// they stand for, on two sequences at different positions: bit for bit on
// the backend under test, and within rounding of the reference's ops.
TEST_P(Conformance, AttentionInputsEqualTheirOps) {
  for (const AttentionShape& s : {AttentionShape{3, 1, 24, 8, 10000.0}, AttentionShape{16, 2, 256, 64, 10000000.0}}) {
    StateLayout layout;
    layout.delta_layer = {false};
    layout.kv_heads = s.kv_heads;
    layout.head_dim = s.head_dim;
    Pair c{cpu_.new_state(layout), cpu_.new_state(layout)}, g{dut_->new_state(layout), dut_->new_state(layout)};
    for (auto [pa, ra, pb, rb] : {std::array<int64_t, 4>{0, 3, 0, 1}, {300, 1, 7, 1}}) {
      const int64_t T = ra + rb, qd = s.heads * s.head_dim, kd = s.kv_heads * s.head_dim;
      const auto qg = random_floats(T * 2 * qd, 80 + T), k = random_floats(T * kd, 81 + T);
      const Vector qn = random_floats(s.head_dim, 82, 0.5f, 1.5f), kn = random_floats(s.head_dim, 83, 0.5f, 1.5f);
      const Vector gqn = dut_->bind(qn), gkn = dut_->bind(kn);
      const auto sc = c.seqs(pa, ra, pb, rb), sg = g.seqs(pa, ra, pb, rb);
      // the reference's separate ops
      Tensor qc = cpu_.tensor(T, qd), gc = cpu_.tensor(T, qd), kc = on(cpu_, k, T, kd);
      cpu_.split_query_gate(on(cpu_, qg, T, 2 * qd), s.heads, s.head_dim, qc, gc);
      cpu_.rmsnorm(qc, qn, 1e-6f, qc);
      cpu_.rmsnorm(kc, kn, 1e-6f, kc);
      cpu_.rope(qc, s.heads, sc, s);
      cpu_.rope(kc, s.kv_heads, sc, s);
      // the separate ops under test, then the one call
      Tensor q1 = dut_->tensor(T, qd), g1 = dut_->tensor(T, qd), k1 = on(*dut_, k, T, kd);
      dut_->split_query_gate(on(*dut_, qg, T, 2 * qd), s.heads, s.head_dim, q1, g1);
      dut_->rmsnorm(q1, gqn, 1e-6f, q1);
      dut_->rmsnorm(k1, gkn, 1e-6f, k1);
      dut_->rope(q1, s.heads, sg, s);
      dut_->rope(k1, s.kv_heads, sg, s);
      Tensor q2 = dut_->tensor(T, qd), g2 = dut_->tensor(T, qd), k2 = on(*dut_, k, T, kd);
      dut_->attention_inputs(on(*dut_, qg, T, 2 * qd), k2, gqn, gkn, 1e-6f, sg, s, q2, g2);
      const std::string at = " (head " + std::to_string(s.head_dim) + ", positions " + std::to_string(pa) + ", " +
                             std::to_string(pb) + ")";
      EXPECT_EQ(dut_->to_host(q2), dut_->to_host(q1)) << "q" << at;
      EXPECT_EQ(dut_->to_host(k2), dut_->to_host(k1)) << "k" << at;
      EXPECT_EQ(dut_->to_host(g2), dut_->to_host(g1)) << "gate" << at;
      // a norm, then a rotation of the rounded norm: two roundings
      expect_close(dut_->to_host(q2), cpu_.to_host(qc), tol(1e-5, 2), "q" + at);
      expect_close(dut_->to_host(k2), cpu_.to_host(kc), tol(1e-5, 2), "k" + at);
    }
  }
}

// A prompt of 70 and one of 5 (chunked on the CPU), then two decode steps of
// one token each. The conv and gates run as separate ops and, from a copy of
// the state, as delta_inputs, which must give the same bits (the test goes on
// from the state delta_inputs left).
void Conformance::check_delta(const DeltaShape& s) {
  const int64_t C = 2 * s.key_heads * s.key_dim + s.value_heads * s.value_dim, VD = s.value_heads * s.value_dim;
  StateLayout layout;
  layout.delta_layer = {true};
  layout.conv_rows = s.conv_kernel - 1;
  layout.conv_dim = C;
  layout.value_heads = s.value_heads;
  layout.key_dim = s.key_dim;
  layout.value_dim = s.value_dim;
  Pair c{cpu_.new_state(layout), cpu_.new_state(layout)}, g{dut_->new_state(layout), dut_->new_state(layout)};
  const Vector conv = random_floats(C * s.conv_kernel, 40, -0.5f, 0.5f), nea = random_floats(s.value_heads, 41, -1.f, -0.1f),
               dtb = random_floats(s.value_heads, 42);
  const Vector gconv = dut_->bind(conv), gnea = dut_->bind(nea), gdtb = dut_->bind(dtb);
  int64_t pa = 0, pb = 0;
  for (auto [ra, rb] : {std::pair<int64_t, int64_t>{70, 5}, {1, 1}, {1, 1}}) {
    const int64_t T = ra + rb;
    const RowKind kind = T > 2 ? RowKind::Prompt : RowKind::Tokens;
    const auto x = random_floats(T * C, 50 + T), b = random_floats(T * s.value_heads, 60 + T),
               a = random_floats(T * s.value_heads, 70 + T);
    const auto sc = c.seqs(pa, ra, pb, rb), sg = g.seqs(pa, ra, pb, rb);
    Pair f{g.a->clone(), g.b->clone()};
    const auto sf = f.seqs(pa, ra, pb, rb);
    Tensor mc = cpu_.tensor(T, C), mg = dut_->tensor(T, C);
    cpu_.conv_silu(0, sc, on(cpu_, x, T, C), conv, s, mc);
    dut_->conv_silu(0, sg, on(*dut_, x, T, C), gconv, s, mg);
    expect_close(dut_->to_host(mg), cpu_.to_host(mc), tol(fp32_tolerance(s.conv_kernel)), "conv_silu");
    resync(mc, mg);
    // beta and the log decay are fp32 on every backend (wide tensors)
    Tensor bc = cpu_.from_host(b, T, s.value_heads), ac = cpu_.from_host(a, T, s.value_heads);
    Tensor bg = dut_->wide_from_host(b, T, s.value_heads), ag = dut_->wide_from_host(a, T, s.value_heads);
    cpu_.delta_gates(mc, bc, ac, nea, dtb, s);
    dut_->delta_gates(mg, bg, ag, gnea, gdtb, s);
    Tensor mf = dut_->tensor(T, C), bf = dut_->wide_from_host(b, T, s.value_heads),
           af = dut_->wide_from_host(a, T, s.value_heads);
    dut_->delta_inputs(0, sf, on(*dut_, x, T, C), gconv, gnea, gdtb, s, mf, bf, af);
    EXPECT_EQ(dut_->to_host(mf), dut_->to_host(mg)) << "delta_inputs (mixed) after " << pa << " tokens";
    EXPECT_EQ(dut_->to_host(bf), dut_->to_host(bg)) << "delta_inputs (beta) after " << pa << " tokens";
    EXPECT_EQ(dut_->to_host(af), dut_->to_host(ag)) << "delta_inputs (decay) after " << pa << " tokens";
    g = std::move(f);
    expect_close(dut_->to_host(mg), cpu_.to_host(mc), tol(1e-5), "delta_gates (q, k)");
    expect_close(dut_->to_host(bg), cpu_.to_host(bc), tol(1e-6), "delta_gates (beta)");
    expect_close(dut_->to_host(ag), cpu_.to_host(ac), tol(1e-5), "delta_gates (decay)");
    resync(mc, mg);
    resync(bc, bg);
    resync(ac, ag);
    Tensor oc = cpu_.tensor(T, VD), og = dut_->tensor(T, VD);
    cpu_.delta_rule(0, sc, mc, ac, bc, s, kind, oc);
    dut_->delta_rule(0, sf, mg, ag, bg, s, kind, og);  // sf: the states g holds now
    expect_close(dut_->to_host(og), cpu_.to_host(oc), tol(1e-4), "delta_rule after " + std::to_string(pa) + " tokens");
    pa += ra;
    pb += rb;
  }
}

TEST_P(Conformance, GatedDeltaNetStepsAndChunks) { check_delta(DeltaShape{2, 4, 16, 24, 4, 64}); }

// The model's Gated DeltaNet: 16 key heads and 32 value heads of 128.
TEST_P(Conformance, GatedDeltaNetAtTheModelsShape) { check_delta(DeltaShape{16, 32, 128, 128, 4, 64}); }

void Conformance::check_moe(int64_t E, int64_t k, int64_t H, int64_t I, int64_t Is, std::span<const Format> formats) {
  for (Format f : formats) {
    std::vector<HostMatrix> gate, up, down;
    for (int64_t e = 0; e < E; ++e) {
      gate.push_back(make_matrix(f, I, H, 100 + e));
      up.push_back(make_matrix(f, I, H, 200 + e));
      down.push_back(make_matrix(f, H, I, 300 + e));
    }
    HostMatrix router = make_matrix(Format::F32, E, H, 400), sg = make_matrix(f, Is, H, 401),
               su = make_matrix(f, Is, H, 402), sd = make_matrix(f, H, Is, 403), seg = make_matrix(Format::BF16, 1, H, 404);
    std::vector<Matrix> hg, hu, hd, dg, du, dd;
    for (int64_t e = 0; e < E; ++e) {
      hg.push_back(gate[e].m), hu.push_back(up[e].m), hd.push_back(down[e].m);
      dg.push_back(dut_->bind(gate[e].m)), du.push_back(dut_->bind(up[e].m)), dd.push_back(dut_->bind(down[e].m));
    }
    const Matrix grouter = dut_->bind(router.m), gsg = dut_->bind(sg.m), gsu = dut_->bind(su.m), gsd = dut_->bind(sd.m),
                 gseg = dut_->bind(seg.m);
    const ExpertWeights wc{&router.m, hg, hu, hd, &sg.m, &su.m, &sd.m, &seg.m};
    const ExpertWeights wg{&grouter, dg, du, dd, &gsg, &gsu, &gsd, &gseg};
    for (int64_t T : {1, 4}) {
      const auto x = random_floats(T * H, 500 + T);
      RouteLog log;
      cpu_.set_route_log(&log);
      Tensor yc = cpu_.tensor(T, H), yg = dut_->tensor(T, H);
      cpu_.moe(on(cpu_, x, T, H), wc, k, yc, T == 1 ? RowKind::Tokens : RowKind::Prompt);
      cpu_.set_route_log(nullptr);
      log.mode = RouteLog::Mode::Replay;
      dut_->set_route_log(&log);
      dut_->moe(on(*dut_, x, T, H), wg, k, yg, kind_under_test(T));
      dut_->set_route_log(nullptr);
      // int8 inputs (the shared expert's down product here) move a product by up
      // to half a step (max |x| / 254) per input times |w|: about 1% of these
      // outputs (a wrong nibble or scale would move them by tens of percent)
      // bf16: the expert activations are rounded too before the down products read them
      expect_close(dut_->to_host(yg), cpu_.to_host(yc), candidate().int8 ? 3e-2 : tol(fp32_tolerance(H + Is), 8),
                   std::string("moe ") + name_of(f));
      // and routing under test picks the reference's experts on these random inputs
      RouteLog own;
      dut_->set_route_log(&own);
      dut_->moe(on(*dut_, x, T, H), wg, k, yg, kind_under_test(T));
      dut_->set_route_log(nullptr);
      EXPECT_EQ(own.experts[0], log.experts[0]) << name_of(f);
    }
  }
}

TEST_P(Conformance, MixtureOfExpertsOnTheSameRoutes) {
  const Format formats[] = {Format::BF16, Format::Q4, Format::Q8};
  check_moe(8, 2, 64, 64, 128, formats);  // widths the group sizes divide
}

// The model's routing: the top 8 of 256 experts (narrow ones, to keep it quick).
TEST_P(Conformance, MixtureOfExpertsRoutesTheTop8Of256) {
  const Format formats[] = {Format::Q4};
  check_moe(256, 8, 64, 16, 32, formats);
}

// The next token chosen where the logits are, as the reference chooses it:
// greedy, and draws under every truncation and adjustment, on a small
// vocabulary and on the model's own (248,320), with ties from bf16 logits.
TEST_P(Conformance, TokenPicksAgree) {
  for (int64_t V : {1037, 248320}) {
    const int64_t n = 6;
    const std::vector<float> l = random_floats(static_cast<size_t>(n * V), 900 + static_cast<uint32_t>(V), -6.f, 6.f);
    const Tensor lc = on(cpu_, l, n, V), lg = on(*dut_, l, n, V);
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int round = 0; round < 8; ++round) {
      std::vector<TokenPick> picks(static_cast<size_t>(n));
      picks[0].temperature = 0;                                   // greedy
      picks[1].temperature = 1.0;                                 // the whole distribution
      picks[2].temperature = 0.7, picks[2].top_k = 40;            // top-k
      picks[3].temperature = 0.8, picks[3].top_p = 0.9;           // top-p
      picks[4].temperature = 1.3, picks[4].min_p = 0.05;          // min-p
      picks[5].temperature = 0.6, picks[5].top_k = 100, picks[5].top_p = 0.8, picks[5].min_p = 0.02;
      for (TokenPick& p : picks) {
        p.u = u(rng);
        p.repetition_penalty = 1.3f;
        p.adjust = {{3, 2.5f, false, 0.f}, {17, 0.f, true, 0.f}, {static_cast<int32_t>(V - 1), -1.f, true, 0.4f}};
      }
      const auto want = cpu_.pick_tokens(lc, picks), got = dut_->pick_tokens(lg, picks);
      EXPECT_EQ(got, want) << "V=" << V << " round " << round;
    }
  }
}

// Whole models: the logits of every fixture prompt within 1e-3 of the
// reference's, and batched equal to alone on every backend. The MLX and
// GGUF Q8_0 fixtures are tiny-a quantized: its prompts serve them too.
class WholeModel : public AgainstTheReference<std::tuple<Candidate, std::string>> {
 protected:
  const Candidate& candidate() const override { return std::get<0>(GetParam()); }
  std::string fixture() const { return std::get<1>(GetParam()); }
  test::Reference prompts() const {
    std::string base = fixture();
    for (const char* derived : {"-mlx", "-q8_0"})
      if (auto at = base.find(derived); at != std::string::npos) base.resize(at);
    return test::load_reference(test::model_dir(base));
  }
  double tolerance() const { return 1e-3; }
  // Lossy activations (bf16 on the GPU, int8 on the CPU) are held kernel by
  // kernel above. On these random fixtures a rounding of 2^-9 in every
  // activation grows along the sequence to tens of percent of later logits
  // even on the same routes (measured: 1-2% at the first prompt, 20-50% at
  // the 130-token one), so a whole-model tolerance would be too loose to
  // catch a bug; the fp32 variants of the same kernels are held here.
  bool skip_lossy() const { return lossy(); }
};

TEST_P(WholeModel, LogitsAgreeOnTheCpusRoutes) {
  if (skip_lossy()) GTEST_SKIP() << "lossy activations: held kernel by kernel (see WholeModel)";
  auto model = Model::load(test::model_dir(fixture()));
  Qwen35MoeForward fc(*model, ref_), fg(*model, dut_);
  const test::Reference ref = prompts();
  const int64_t V = model->config().vocab_size;
  double worst = 0;
  for (const auto& p : ref.prompts) {
    RouteLog log;
    fc.backend().set_route_log(&log);
    SequenceState sc = fc.new_state(), sg = fg.new_state();
    const auto want = fc.forward(p.tokens, sc, LogitsFor::AllPositions);
    fc.backend().set_route_log(nullptr);
    log.mode = RouteLog::Mode::Replay;
    fg.backend().set_route_log(&log);
    const auto got = fg.forward(p.tokens, sg, LogitsFor::AllPositions);
    fg.backend().set_route_log(nullptr);
    const double e = test::max_row_relative_error(got, want, V);
    worst = std::max(worst, e);
    EXPECT_LT(e, tolerance()) << fixture() << ", a prompt of " << p.tokens.size() << " tokens";
  }
  RecordProperty("max_row_relative_error", std::to_string(worst));
  std::printf("%s on %s: worst row relative error against the reference %.3g\n", fixture().c_str(),
              candidate().name.c_str(), worst);
}

TEST_P(WholeModel, GreedyStepsAgreeWhereTheMarginDecides) {
  if (skip_lossy()) GTEST_SKIP() << "lossy activations: held kernel by kernel (see WholeModel)";
  auto model = Model::load(test::model_dir(fixture()));
  Qwen35MoeForward fc(*model, ref_), fg(*model, dut_);
  const test::Reference ref = prompts();
  const auto& p = ref.prompts.back();
  RouteLog log;
  SequenceState sc = fc.new_state(), sg = fg.new_state();
  std::vector<int32_t> feed = p.tokens;
  int decided = 0;
  for (int step = 0; step < 12; ++step) {
    log = RouteLog{};
    fc.backend().set_route_log(&log);
    const auto lc = fc.forward(feed, sc, LogitsFor::LastPosition);
    fc.backend().set_route_log(nullptr);
    log.mode = RouteLog::Mode::Replay;
    fg.backend().set_route_log(&log);
    const auto lg = fg.forward(feed, sg, LogitsFor::LastPosition);
    fg.backend().set_route_log(nullptr);
    std::vector<float> sorted = lc;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const int32_t top_c = static_cast<int32_t>(std::max_element(lc.begin(), lc.end()) - lc.begin());
    const int32_t top_g = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    if (sorted[0] - sorted[1] > 2 * tolerance() * std::max(1.0, max_abs(lc))) {
      EXPECT_EQ(top_g, top_c) << "step " << step;
      ++decided;
    }
    feed = {top_c};
  }
  EXPECT_GT(decided, 6);
}

TEST_P(WholeModel, BatchedEqualsAloneAndAResumedPrefixEqualsAFreshPrompt) {
  auto model = Model::load(test::model_dir(fixture()));
  Qwen35MoeForward fg(*model, dut_);
  const test::Reference ref = prompts();
  const auto& prompt = ref.prompts.back().tokens;
  ASSERT_GT(prompt.size(), 66u);
  // a resumed prefix: the state after 64 tokens (a chunk multiple, where the
  // prefix cache takes its snapshots), copied, then the rest
  SequenceState fresh = fg.new_state(), half = fg.new_state();
  const auto want = fg.forward(prompt, fresh, LogitsFor::LastPosition, ForwardMode::Prompt);
  const size_t cut = 64;
  fg.forward(std::span<const int32_t>(prompt.data(), cut), half, LogitsFor::LastPosition, ForwardMode::Prompt);
  SequenceState resumed = half;
  const auto got = fg.forward(std::span<const int32_t>(prompt.data() + cut, prompt.size() - cut), resumed,
                              LogitsFor::LastPosition, ForwardMode::Prompt);
  EXPECT_EQ(got, want);
  // three sequences decoding together give each what it gets alone
  std::vector<SequenceState> together, alone;
  std::vector<SequenceState*> ptrs;
  for (int i = 0; i < 3; ++i) {
    together.push_back(fg.new_state());
    alone.push_back(fg.new_state());
  }
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> p(prompt.begin(), prompt.begin() + 3 + 2 * i);
    fg.forward(p, together[i], LogitsFor::LastPosition, ForwardMode::Prompt);
    fg.forward(p, alone[i], LogitsFor::LastPosition, ForwardMode::Prompt);
    ptrs.push_back(&together[i]);
  }
  const std::vector<int32_t> next = {prompt[1], prompt[2], prompt[3]};
  const auto rows = fg.decode_batch(next, ptrs);
  const int64_t V = model->config().vocab_size;
  for (int i = 0; i < 3; ++i) {
    const auto one = fg.forward(std::span<const int32_t>(&next[i], 1), alone[i], LogitsFor::LastPosition);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), rows.begin() + i * V)) << "sequence " << i;
  }
}

// A decode step replayed from its recording (Backend::decode_step) gives
// the logits that queueing each operation gives, bit for bit: over a cache
// growth (which moves the caches, so the step is recorded anew) and for a
// batch as for one sequence. The replays are checked to happen: a replayed
// step queues a few operations, a queued one dozens.
TEST_P(WholeModel, ReplayedDecodeStepsEqualQueuedOnes) {
  if (candidate().device != Device::Cuda) GTEST_SKIP() << "only the GPU records steps";
  BackendOptions o;
  o.float_activations = !candidate().bf16;
  o.step_graphs = false;
  auto model = Model::load(test::model_dir(fixture()));
  Qwen35MoeForward fr(*model, dut_), fq(*model, make_backend(Device::Cuda, o));
  const test::Reference ref = prompts();
  const std::vector<int32_t> prompt(ref.prompts.back().tokens.begin(), ref.prompts.back().tokens.begin() + 6);
  auto argmax = [](const std::vector<float>& l) {
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  };
  SequenceState sr = fr.new_state(), sq = fq.new_state();
  ASSERT_EQ(fr.forward(prompt, sr, LogitsFor::LastPosition), fq.forward(prompt, sq, LogitsFor::LastPosition));
  int32_t tok = prompt.back();
  uint64_t replayed_ops = 0, queued_ops = 0;
  for (int step = 0; step < 300; ++step) {  // past 256 positions: the caches grow once
    const uint64_t r0 = fr.backend().activity().operations;
    const auto lr = fr.forward(std::span<const int32_t>(&tok, 1), sr, LogitsFor::LastPosition);
    const uint64_t r1 = fr.backend().activity().operations, q1 = fq.backend().activity().operations;
    const auto lq = fq.forward(std::span<const int32_t>(&tok, 1), sq, LogitsFor::LastPosition);
    ASSERT_EQ(lr, lq) << "decode step " << step;
    if (step == 100) replayed_ops = r1 - r0, queued_ops = fq.backend().activity().operations - q1;
    tok = argmax(lq);
  }
  EXPECT_LT(4 * replayed_ops, queued_ops) << "the steps were not replayed";
  // two sequences decoding together, replayed and queued
  std::vector<SequenceState> rs, qs;
  for (int i = 0; i < 2; ++i) {
    rs.push_back(fr.new_state());
    qs.push_back(fq.new_state());
    const std::vector<int32_t> p(prompt.begin(), prompt.begin() + 3 + i);
    fr.forward(p, rs.back(), LogitsFor::LastPosition);
    fq.forward(p, qs.back(), LogitsFor::LastPosition);
  }
  std::vector<SequenceState*> rp = {&rs[0], &rs[1]}, qp = {&qs[0], &qs[1]};
  std::vector<int32_t> next = {prompt[4], prompt[5]};
  const int64_t V = model->config().vocab_size;
  for (int step = 0; step < 20; ++step) {
    const auto lr = fr.decode_batch(next, rp), lq = fq.decode_batch(next, qp);
    ASSERT_EQ(lr, lq) << "batched decode step " << step;
    for (int i = 0; i < 2; ++i) next[i] = argmax(std::vector<float>(lq.begin() + i * V, lq.begin() + (i + 1) * V));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(candidates()),
                         [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(Fixtures, WholeModel,
                         ::testing::Combine(::testing::ValuesIn(candidates()),
                                            ::testing::Values<std::string>("tiny-a", "tiny-b", "tiny-c", "tiny-a-mlx4",
                                                                           "tiny-a-mlx6", "tiny-a-mlx8",
                                                                           "tiny-a-q8_0.gguf")),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param).name + "_" + std::get<1>(info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           std::replace(n.begin(), n.end(), '.', '_');
                           return n;
                         });

}  // namespace
}  // namespace lily
