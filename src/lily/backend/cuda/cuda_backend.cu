#include "lily/backend/cuda/cuda_backend.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "lily/backend/cpu/attention.h"
#include "lily/backend/cuda/kernels.h"
#include "lily/error.h"
#include "lily/io/gguf.h"

namespace lily::cuda {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

namespace {
std::atomic<uint64_t> queued{0};
// Whether this thread is recording a step (CudaBackend::decode_step): a
// recorded launch is not queued, its replay is one operation.
thread_local bool recording_here = false;
}  // namespace

void launched(const char* what) {
  check(cudaGetLastError(), what);
  count_operation();
}
void count_operation() {
  if (!recording_here) queued.fetch_add(1, std::memory_order_relaxed);
}
uint64_t operations_queued() { return queued.load(std::memory_order_relaxed); }

namespace {
// cudaMemcpyAsync, counted among the operations queued.
cudaError_t copy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
  count_operation();
  return cudaMemcpyAsync(dst, src, bytes, kind, s);
}
}  // namespace

namespace {

// Device memory in blocks reused by size: activations come and go every
// layer, and cudaMalloc is far too slow for that.
// A recorded step has a pool of its own (an arena): its blocks are baked
// into the recording, so they never go back to be freed or reused outside it.
class Pool {
 public:
  explicit Pool(int device, bool arena = false) : device_(device), arena_(arena) {}
  ~Pool() {
    for (auto& [size, p] : free_) cudaFree(p);
  }
  void* take(size_t bytes) {
    bytes = round(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        return p;
      }
    }
    return raw(bytes);
  }
  void give(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.emplace(round(bytes), p);
  }
  // Memory that is not pooled (weights, states); failure names what was asked and what is free.
  void* raw(size_t bytes) {
    void* p = nullptr;
    if (bytes == 0) bytes = 1;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation && !arena_) {
      cudaGetLastError();
      {
        // give back the pooled blocks and try once more
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& [size, q] : free_) cudaFree(q);
        free_.clear();
      }
      e = cudaMalloc(&p, bytes);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw Error("out of GPU memory on device " + std::to_string(device_) + ": asked for " +
                  std::to_string(bytes >> 20) + " MiB with " + std::to_string(free_b >> 20) + " MiB free of " +
                  std::to_string(total_b >> 20) + " MiB");
    }
    return p;
  }

 private:
  static size_t round(size_t b) {
    size_t r = 256;
    while (r < b) r <<= 1;
    return r;
  }
  int device_;
  bool arena_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
};

// A device allocation owned by a shared_ptr (weights, states).
std::shared_ptr<void> device_block(const std::shared_ptr<Pool>& pool, size_t bytes) {
  void* p = pool->raw(bytes);
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

ElemType elem_type(DType t) {
  switch (t) {
    case DType::F32: return ElemType::F32;
    case DType::F16: return ElemType::F16;
    case DType::BF16: return ElemType::BF16;
    default: throw Error("the CUDA backend reads F32, F16 and BF16 weights, not " + std::string(dtype_name(t)));
  }
}

DevMatrix dev(const Matrix& m) {
  DevMatrix d;
  d.data = static_cast<const uint8_t*>(m.data);
  d.scales = static_cast<const uint8_t*>(m.scales);
  d.biases = static_cast<const uint8_t*>(m.biases);
  d.rows = m.rows;
  d.cols = m.cols;
  d.row_bytes = static_cast<int64_t>(m.row_bytes());
  d.dtype = m.quantized() ? ElemType::F32 : elem_type(m.dtype);
  d.bits = m.bits;
  d.group_size = m.group_size;
  d.scale_dtype = m.quantized() ? elem_type(m.scale_dtype) : ElemType::BF16;
  return d;
}

struct KvBuffer {
  std::shared_ptr<void> mem;
  size_t used = 0, capacity = 0;  // elements of the activation type
};

std::atomic<uint64_t> next_state_serial{1};

class CudaState : public StateStorage {
 public:
  struct Layer {
    std::shared_ptr<void> conv, recurrent;  // [kernel-1, conv_dim], [v_heads, dk, dv]
    size_t conv_n = 0, recurrent_n = 0;
    KvBuffer keys, values;
  };
  // `elem`: bytes of an activation (the KV cache holds activations; the GDN state is fp32).
  CudaState(std::shared_ptr<Pool> pool, const StateLayout& l, size_t elem, cudaStream_t s)
      : pool_(std::move(pool)), stream_(s), elem_(elem), kv_row_(static_cast<size_t>(l.kv_heads * l.head_dim)) {
    layers_.resize(l.delta_layer.size());
    for (size_t i = 0; i < layers_.size(); ++i)
      if (l.delta_layer[i]) {
        Layer& y = layers_[i];
        y.conv_n = static_cast<size_t>(l.conv_rows * l.conv_dim);
        y.recurrent_n = static_cast<size_t>(l.value_heads * l.key_dim * l.value_dim);
        y.conv = device_block(pool_, y.conv_n * sizeof(float));
        y.recurrent = device_block(pool_, y.recurrent_n * sizeof(float));
      }
    reset();
  }
  std::unique_ptr<StateStorage> clone() const override {
    std::unique_ptr<CudaState> c = copy_recurrent();
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& a = layers_[i];
      Layer& b = c->layers_[i];
      for (auto [from, to] : {std::pair{&a.keys, &b.keys}, std::pair{&a.values, &b.values}}) {
        to->used = to->capacity = from->used;
        if (from->used) to->mem = copy(from->mem.get(), from->used * elem_);
      }
    }
    return c;
  }
  std::unique_ptr<StateStorage> clone_recurrent() const override { return copy_recurrent(); }
  void restore_recurrent(const StateStorage& from) override {
    const auto* f = dynamic_cast<const CudaState*>(&from);
    if (f == nullptr || f->layers_.size() != layers_.size())
      throw Error("restore_recurrent: not a snapshot of a GPU state of this model");
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& a = f->layers_[i];
      Layer& b = layers_[i];
      if (a.conv_n != b.conv_n || a.recurrent_n != b.recurrent_n)
        throw Error("restore_recurrent: layer " + std::to_string(i) + " does not match");
      if (b.conv)
        check(copy_async(b.conv.get(), a.conv.get(), b.conv_n * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
              "state restore");
      if (b.recurrent)
        check(copy_async(b.recurrent.get(), a.recurrent.get(), b.recurrent_n * sizeof(float),
                         cudaMemcpyDeviceToDevice, stream_),
              "state restore");
    }
  }
  void truncate(int64_t layer, int64_t tokens) override {
    if (layer < 0 || layer >= layer_count() || tokens < 0)
      throw Error("truncate: no layer " + std::to_string(layer) + " or a negative length");
    Layer& l = layers_[static_cast<size_t>(layer)];
    const size_t n = static_cast<size_t>(tokens) * kv_row_;
    if (l.recurrent) return;
    if (n > l.keys.used)
      throw Error("truncate: layer " + std::to_string(layer) + " holds fewer than " + std::to_string(tokens) + " positions");
    l.keys.used = l.values.used = n;
  }
  int64_t layer_count() const override { return static_cast<int64_t>(layers_.size()); }
  void reset() override {
    for (Layer& l : layers_) {
      if (l.conv) check(cudaMemsetAsync(l.conv.get(), 0, l.conv_n * sizeof(float), stream_), "state reset");
      if (l.recurrent) check(cudaMemsetAsync(l.recurrent.get(), 0, l.recurrent_n * sizeof(float), stream_), "state reset");
      l.keys.used = l.values.used = 0;
    }
  }
  size_t bytes() const override {
    size_t n = sizeof(*this);
    for (const Layer& l : layers_)
      n += (l.conv_n + l.recurrent_n) * sizeof(float) + (l.keys.capacity + l.values.capacity) * elem_;
    return n;
  }
  Layer& layer(int64_t i) { return layers_[static_cast<size_t>(i)]; }
  // Never the same for two states, even where one takes the other's address.
  uint64_t serial() const { return serial_; }
  // Counts the moves of the caches (each growth): a recording that holds
  // their addresses is valid while this is unchanged.
  uint64_t generation() const { return generation_; }
  // Room in every KV cache for positions 0..rows-1, by doubling from at
  // least kMinRows; the cached rows move with a growth. false where a
  // growth was needed and `may_move` forbade it.
  static constexpr size_t kMinRows = 256;
  bool reserve(int64_t rows, bool may_move = true) {
    const size_t need = static_cast<size_t>(rows) * kv_row_;
    for (Layer& l : layers_) {
      if (l.recurrent) continue;
      for (KvBuffer* b : {&l.keys, &l.values}) {
        if (need <= b->capacity) continue;
        if (!may_move) return false;
        size_t cap = std::max(b->capacity, kMinRows * kv_row_);
        while (cap < need) cap *= 2;
        auto mem = device_block(pool_, cap * elem_);
        if (b->used)
          check(copy_async(mem.get(), b->mem.get(), b->used * elem_, cudaMemcpyDeviceToDevice, stream_), "KV grow");
        b->mem = std::move(mem);
        b->capacity = cap;
        ++generation_;
      }
    }
    return true;
  }
  // The caches hold positions 0..rows-1 now.
  void set_length(int64_t rows) {
    for (Layer& l : layers_)
      if (!l.recurrent) l.keys.used = l.values.used = static_cast<size_t>(rows) * kv_row_;
  }
  // Attention layer `layer`'s cache holds positions 0..rows-1 now (the MTP
  // head's layer runs a position behind the model's).
  void set_length(int64_t layer, int64_t rows) {
    Layer& l = layers_[static_cast<size_t>(layer)];
    l.keys.used = l.values.used = static_cast<size_t>(rows) * kv_row_;
  }
  // Positions the caches have room for (the most an int64 holds where there are none).
  int64_t capacity_rows() const {
    int64_t rows = INT64_MAX;
    for (const Layer& l : layers_)
      if (!l.recurrent) rows = std::min(rows, static_cast<int64_t>(std::min(l.keys.capacity, l.values.capacity) / kv_row_));
    return rows;
  }

 private:
  CudaState(std::shared_ptr<Pool> pool, size_t elem, size_t kv_row, cudaStream_t s)
      : pool_(std::move(pool)), stream_(s), elem_(elem), kv_row_(kv_row) {}
  // A state with this one's conv and recurrent states and empty KV caches.
  std::unique_ptr<CudaState> copy_recurrent() const {
    auto c = std::unique_ptr<CudaState>(new CudaState(pool_, elem_, kv_row_, stream_));
    c->layers_.resize(layers_.size());
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& a = layers_[i];
      Layer& b = c->layers_[i];
      b.conv_n = a.conv_n;
      b.recurrent_n = a.recurrent_n;
      if (a.conv) b.conv = copy(a.conv.get(), a.conv_n * sizeof(float));
      if (a.recurrent) b.recurrent = copy(a.recurrent.get(), a.recurrent_n * sizeof(float));
    }
    return c;
  }
  std::shared_ptr<void> copy(const void* src, size_t bytes) const {
    auto mem = device_block(pool_, bytes);
    check(copy_async(mem.get(), src, bytes, cudaMemcpyDeviceToDevice, stream_), "state copy");
    return mem;
  }
  std::shared_ptr<Pool> pool_;
  cudaStream_t stream_;
  size_t elem_;
  size_t kv_row_;  // elements of one position's keys (or values)
  uint64_t serial_ = next_state_serial.fetch_add(1);
  uint64_t generation_ = 0;
  std::vector<Layer> layers_;
};

// Pinned slots that small host data passes through on its way to the device:
// the copy from pinned memory is asynchronous, so a launch's ids or
// positions cost the host no wait, and the caller's buffer may go at once.
// A slot is written again only after its last copy has run (its event).
class Staging {
 public:
  static constexpr size_t kSlots = 64, kSlotBytes = size_t{64} << 10;
  Staging() {
    check(cudaHostAlloc(reinterpret_cast<void**>(&host_), kSlots * kSlotBytes, cudaHostAllocPortable), "pinned staging");
    for (cudaEvent_t& e : done_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "staging event");
  }
  ~Staging() {
    for (cudaEvent_t e : done_) cudaEventDestroy(e);
    cudaFreeHost(host_);
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  // false where the data is larger than a slot: the caller copies it itself
  bool copy(void* device, const void* host, size_t bytes, cudaStream_t s) {
    if (bytes > kSlotBytes) return false;
    std::lock_guard<std::mutex> lock(mu_);
    const size_t i = next_++ % kSlots;
    check(cudaEventSynchronize(done_[i]), "staging");  // the slot's previous copy has been read
    uint8_t* slot = host_ + i * kSlotBytes;
    std::memcpy(slot, host, bytes);
    check(copy_async(device, slot, bytes, cudaMemcpyHostToDevice, s), "staging");
    check(cudaEventRecord(done_[i], s), "staging");
    return true;
  }

 private:
  std::mutex mu_;
  uint8_t* host_ = nullptr;
  cudaEvent_t done_[kSlots] = {};
  size_t next_ = 0;
};

CudaState& state_of(const SeqSlice& s) { return static_cast<CudaState&>(*s.state); }

// The absolute position of each of a call's `rows` rows, into `pos`.
void fill_positions(std::span<const SeqSlice> seqs, int64_t* pos) {
  for (const SeqSlice& q : seqs)
    for (int64_t t = 0; t < q.rows; ++t) pos[q.row + t] = q.position + t;
}

// A decode step recorded as a CUDA graph (CudaBackend::decode_step). Every
// address the recording holds stays put while it lives: its activations
// come from its own arena, the states' caches are checked unmoved (their
// generation is part of the key), and what changes from step to step, the
// ids and positions, is read from `inputs`, written before each replay.
struct StepGraph {
  std::vector<uint64_t> key;  // the program, the row count, then per sequence: serial, generation, rows
  std::shared_ptr<Pool> arena;
  Tensor inputs;  // positions [n] (int64), then ids [n] (int32)
  int64_t rows = 0;
  int64_t last_position = 0;  // the largest position the recording serves (sizes its attention)
  Tensor out;                 // the logits
  std::vector<std::shared_ptr<void>> constants;  // data staged while recording (CudaBackend::staged)
  cudaGraphExec_t exec = nullptr;
  uint64_t used = 0;  // when it last ran, for eviction

  int64_t* positions() const { return static_cast<int64_t*>(inputs.data); }
  int32_t* ids() const { return reinterpret_cast<int32_t*>(positions() + rows); }
  size_t input_bytes() const { return static_cast<size_t>(rows) * (sizeof(int64_t) + sizeof(int32_t)); }
  ~StepGraph() {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

class CudaBackend : public Backend {
 public:
  CudaBackend(int ordinal, DType activations, bool step_graphs)
      : device_(ordinal), act_(activations), step_graphs_(step_graphs) {
    if (act_ != DType::F32 && act_ != DType::BF16)
      throw Error(std::string("the CUDA backend keeps activations in F32 or BF16, not ") + std::string(dtype_name(act_)));
    check(cudaSetDevice(ordinal), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreate");
    staging_ = std::make_unique<Staging>();
    pool_ = std::make_shared<Pool>(ordinal);
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties");
    name_ = p.name;
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    graphs_.clear();
    cudaStreamDestroy(side_);
    cudaStreamDestroy(stream_);
  }

  Device device() const override { return Device::Cuda; }
  DeviceActivity activity() const override {
    return {operations_queued(), waited_ns_.load(std::memory_order_relaxed) / 1e9};
  }
  void profile(bool on) override {
    check(on ? cudaProfilerStart() : cudaProfilerStop(), "profiler bracket");
  }
  size_t memory_free() const override {
    size_t free_b = 0, total_b = 0;
    check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    return free_b;
  }
  // A device-to-device copy of 1 GiB reads and writes it: twice the bytes over the time, best of five.
  double read_bandwidth() override {
    const size_t bytes = size_t{1} << 30;
    auto a = device_block(pool_, bytes), b = device_block(pool_, bytes);
    cudaEvent_t e0, e1;
    check(cudaEventCreate(&e0), "event");
    check(cudaEventCreate(&e1), "event");
    float best = 1e30f;
    for (int i = 0; i < 5; ++i) {
      check(cudaEventRecord(e0, stream_), "event");
      check(copy_async(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream_), "bandwidth copy");
      check(cudaEventRecord(e1, stream_), "event");
      check(cudaEventSynchronize(e1), "event");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, e0, e1), "event");
      best = std::min(best, ms);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return 2.0 * static_cast<double>(bytes) / (best / 1e3);
  }
  std::string describe() const override {
    return "cuda:" + std::to_string(device_) + " (" + name_ + ", " + (act_ == DType::BF16 ? "bf16" : "fp32") +
           " activations)";
  }

  Matrix bind(const Matrix& host) override {
    if (host.device == Device::Cuda) return host;
    // GGUF blocks are read as the affine groups the kernels know, holding the same values
    if (host.ggml_blocks()) return bind(affine_copy_of_blocks(host));
    Matrix m = host;
    const size_t data_bytes = static_cast<size_t>(host.rows) * host.row_bytes(), sb = host.scale_bytes();
    auto data = upload(host.data, data_bytes);
    std::shared_ptr<void> scales, biases;
    if (host.quantized()) {
      scales = upload(host.scales, sb);
      biases = upload(host.biases, sb);
    }
    m.data = data.get();
    m.scales = scales.get();
    m.biases = biases.get();
    m.device = Device::Cuda;
    m.owner = std::make_shared<std::vector<std::shared_ptr<void>>>(std::vector<std::shared_ptr<void>>{data, scales, biases});
    return m;
  }

  Vector bind(const Vector& host) override {
    if (host.device == Device::Cuda) return host;
    auto mem = upload(host.data(), host.size() * sizeof(float));
    Vector v;
    v.device = Device::Cuda;
    v.ptr = static_cast<const float*>(mem.get());
    v.n = host.n;
    v.owner = mem;
    return v;
  }

  std::unique_ptr<StateStorage> new_state(const StateLayout& layout) override {
    return std::make_unique<CudaState>(pool_, layout, dtype_size(act_), stream_);
  }

  Tensor tensor(int64_t rows, int64_t cols) override { return buffer(rows, cols, act_); }
  Tensor wide_tensor(int64_t rows, int64_t cols) override { return buffer(rows, cols, DType::F32); }

  // Device memory from the pool viewed as [rows, cols] of `dtype`.
  Tensor buffer(int64_t rows, int64_t cols, DType dtype) {
    Tensor t;
    t.device = Device::Cuda;
    t.dtype = dtype;
    t.rows = rows;
    t.cols = cols;
    const size_t bytes = t.bytes();
    std::shared_ptr<Pool> pool = recording_ ? recording_->arena : pool_;
    void* p = pool->take(bytes);
    t.data = p;
    t.owner = std::shared_ptr<void>(p, [pool, bytes](void* q) { pool->give(q, bytes); });
    return t;
  }

  Tensor wide_from_host(std::span<const float> data, int64_t rows, int64_t cols) override {
    if (static_cast<int64_t>(data.size()) != rows * cols) throw Error("from_host: the data is not [rows, cols]");
    Tensor t = buffer(rows, cols, DType::F32);
    check(copy_async(t.data, data.data(), data.size_bytes(), cudaMemcpyHostToDevice, stream_), "from_host");
    wait("from_host");
    return t;
  }

  Tensor from_host(std::span<const float> data, int64_t rows, int64_t cols) override {
    if (static_cast<int64_t>(data.size()) != rows * cols) throw Error("from_host: the data is not [rows, cols]");
    Tensor f32 = buffer(rows, cols, DType::F32);
    check(copy_async(f32.data, data.data(), data.size_bytes(), cudaMemcpyHostToDevice, stream_), "from_host");
    Tensor t = f32;
    if (act_ == DType::BF16) {
      t = tensor(rows, cols);
      to_bf16(static_cast<const float*>(f32.data), t.numel(), ptr<bf16>(t), stream_);
    }
    wait("from_host");
    return t;
  }

  std::vector<float> to_host(const Tensor& t) override {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    Tensor f32 = t;
    if (t.dtype == DType::BF16) {
      f32 = buffer(t.rows, t.cols, DType::F32);
      to_float(ptr<bf16>(t), t.numel(), static_cast<float*>(f32.data), stream_);
    }
    // the wait comes first: a copy into pageable memory would wait for the
    // stream itself, and that time would count as the host's, not as waiting
    wait("to_host");
    check(copy_async(out.data(), f32.data, f32.bytes(), cudaMemcpyDeviceToHost, stream_), "to_host");
    return out;
  }

  Tensor embed(const Matrix& table, std::span<const int32_t> ids) override {
    Tensor x = tensor(static_cast<int64_t>(ids.size()), table.cols);
    Tensor d_ids;
    const int32_t* id_ptr;
    if (recording_) {  // what the replays write
      if (static_cast<int64_t>(ids.size()) != recording_->rows) throw Error("embed: not the recorded step's rows");
      id_ptr = recording_->ids();
    } else {
      d_ids = staged(ids.data(), ids.size_bytes());
      id_ptr = static_cast<const int32_t*>(d_ids.data);
    }
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::embed(dev(table), id_ptr, x.rows, ptr<A>(x), stream_);
    });
    return x;
  }

  Tensor gather(const Tensor& x, std::span<const int64_t> rows) override {
    Tensor out = tensor(static_cast<int64_t>(rows.size()), x.cols);
    auto d_rows = staged(rows.data(), rows.size_bytes());
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      gather_rows(ptr<A>(x), x.cols, static_cast<const int64_t*>(d_rows.data), out.rows, ptr<A>(out), stream_);
    });
    return out;
  }

  void rmsnorm(const Tensor& x, const Vector& w, float eps, Tensor& y) override {
    const int64_t dim = static_cast<int64_t>(w.size());
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::rmsnorm(ptr<A>(x), x.numel() / dim, dim, w.data(), eps, ptr<A>(y), stream_);
    });
  }
  void add_rmsnorm(Tensor& x, const Tensor& y, const Vector& w, float eps, Tensor& h) override {
    const int64_t dim = static_cast<int64_t>(w.size());
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::add_rmsnorm(ptr<A>(x), ptr<A>(y), x.numel() / dim, dim, w.data(), eps, ptr<A>(h), stream_);
    });
  }
  void add(Tensor& x, const Tensor& y) override {
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::add(ptr<A>(x), ptr<A>(y), x.numel(), stream_);
    });
  }
  void matmul(const Tensor& x, const Matrix& w, Tensor& y, RowKind) override {
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      if (y.dtype == DType::F32)  // a wide output (wide_tensor)
        cuda::matmul(dev(w), ptr<A>(x), x.rows, ptr<float>(y), stream_);
      else
        cuda::matmul(dev(w), ptr<A>(x), x.rows, ptr<A>(y), stream_);
    });
  }
  // Jobs on the same input go out as one launch (cuda::matmul_batch).
  void matmul_batch(std::span<const MatmulJob> jobs, RowKind kind) override {
    bool shared = jobs.size() <= static_cast<size_t>(kMaxProducts);
    for (const MatmulJob& j : jobs) shared = shared && j.x == jobs[0].x;
    if (!shared) {
      for (const MatmulJob& j : jobs) matmul(*j.x, *j.w, *j.y, kind);
      return;
    }
    std::vector<ProductJob> p;
    for (const MatmulJob& j : jobs) p.push_back({dev(*j.w), j.y->data, j.y->dtype == DType::F32});
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::matmul_batch(p.data(), static_cast<int>(p.size()), ptr<A>(*jobs[0].x), jobs[0].x->rows, stream_);
    });
  }

  void moe(const Tensor& x, const ExpertWeights& w, int64_t k, Tensor& y, RowKind) override {
    const int64_t T = x.rows, H = x.cols, E = w.router->rows, per = k + 1;
    const ExpertTables& tab = tables(w);
    // the router's logits, ids and weights stay fp32 whatever the activations
    Tensor logits = buffer(T, E, DType::F32), shared = buffer(T, 1, DType::F32);
    Tensor ids = buffer(T, per, DType::I32), weights = buffer(T, per, DType::F32);
    auto* d_ids = static_cast<int32_t*>(ids.data);
    auto* d_w = static_cast<float*>(weights.data);
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      // the shared expert's gate is one more row of the router's launch; route_topk takes its sigmoid
      const ProductJob jobs[2] = {{dev(*w.router), logits.data, true}, {dev(*w.shared_expert_gate), shared.data, true}};
      cuda::matmul_batch(jobs, 2, ptr<A>(x), T, stream_);
      route_topk(static_cast<const float*>(logits.data), static_cast<const float*>(shared.data), T, E, k, per, d_ids,
                 d_w, stream_);
      if (route_log_) replay_or_record(d_ids, d_w, T, k, per);
      Tensor acts = tensor(T * per, tab.max_inter);
      const WeightFormat* chunked = tab.chunked && reinterpret_cast<uintptr_t>(x.data) % 16 == 0 ? &tab.format : nullptr;
      expert_gate_up(tab.gate, tab.up, d_ids, T, per, ptr<A>(x), H, tab.max_inter, ptr<A>(acts), chunked, stream_);
      expert_down(tab.down, d_ids, static_cast<const float*>(d_w), T, per, ptr<A>(acts), tab.max_inter, H, ptr<A>(y),
                  chunked, stream_);
    });
  }

  void conv_silu(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& x, const Vector& w, const DeltaShape& s,
                 Tensor& y) override {
    const int64_t C = x.cols;
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      for (const SeqSlice& q : seqs)
        cuda::conv_silu(ptr<A>(x) + q.row * C, q.rows, C, w.data(), s.conv_kernel,
                        static_cast<float*>(state_of(q).layer(layer).conv.get()), ptr<A>(y) + q.row * C, stream_);
    });
  }

  void delta_gates(Tensor& mixed, Tensor& beta, Tensor& decay, const Vector& neg_exp_a, const Vector& dt_bias,
                   const DeltaShape& s) override {
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::delta_gates(ptr<A>(mixed), mixed.rows, mixed.cols, s.key_heads, s.key_dim, ptr<float>(beta), ptr<float>(decay),
                        s.value_heads, neg_exp_a.data(), dt_bias.data(), stream_);
    });
  }

  // A decode step's sequences (a row each) take one launch apiece for both.
  void delta_inputs(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& qkv, const Vector& conv,
                    const Vector& neg_exp_a, const Vector& dt_bias, const DeltaShape& s, Tensor& mixed, Tensor& beta,
                    Tensor& decay) override {
    const bool single_rows = std::all_of(seqs.begin(), seqs.end(), [](const SeqSlice& q) { return q.rows == 1; });
    if (!single_rows) return Backend::delta_inputs(layer, seqs, qkv, conv, neg_exp_a, dt_bias, s, mixed, beta, decay);
    const int64_t C = qkv.cols, Hv = s.value_heads;
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      for (const SeqSlice& q : seqs)
        cuda::conv_gates(ptr<A>(qkv) + q.row * C, C, conv.data(), s.conv_kernel,
                         static_cast<float*>(state_of(q).layer(layer).conv.get()), ptr<A>(mixed) + q.row * C,
                         s.key_heads, s.key_dim, ptr<float>(beta) + q.row * Hv, ptr<float>(decay) + q.row * Hv, Hv,
                         neg_exp_a.data(), dt_bias.data(), stream_);
    });
  }

  void delta_rule(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& mixed, const Tensor& decay,
                  const Tensor& beta, const DeltaShape& s, RowKind, Tensor& out) override {
    const int64_t C = mixed.cols, Hv = s.value_heads, VD = Hv * s.value_dim;
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      for (const SeqSlice& q : seqs)
        cuda::delta_rule(ptr<A>(mixed) + q.row * C, C, ptr<float>(decay) + q.row * Hv, ptr<float>(beta) + q.row * Hv, q.rows,
                         s.key_heads, Hv, s.key_dim, s.value_dim, s.tiled_value_heads,
                         static_cast<float*>(state_of(q).layer(layer).recurrent.get()), ptr<A>(out) + q.row * VD,
                         stream_);
    });
  }

  void gated_rmsnorm(const Tensor& x, const Tensor& z, const Vector& w, float eps, Tensor& y) override {
    const int64_t dim = static_cast<int64_t>(w.size());
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::gated_rmsnorm(ptr<A>(x), ptr<A>(z), x.numel() / dim, dim, w.data(), eps, ptr<A>(y), stream_);
    });
  }

  void split_query_gate(const Tensor& qg, int64_t heads, int64_t hd, Tensor& q, Tensor& gate) override {
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::split_query_gate(ptr<A>(qg), qg.rows, heads, hd, ptr<A>(q), ptr<A>(gate), stream_);
    });
  }

  void rope(Tensor& x, int64_t heads, std::span<const SeqSlice> seqs, const AttentionShape& s) override {
    const int64_t* pos = row_positions(seqs, x.rows);
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::rope(ptr<A>(x), x.rows, heads, s.head_dim, s.rotary_dim, inv_freq(s), pos, stream_);
    });
  }

  void attention_inputs(const Tensor& qg, Tensor& k, const Vector& q_norm, const Vector& k_norm, float eps,
                        std::span<const SeqSlice> seqs, const AttentionShape& s, Tensor& q, Tensor& gate) override {
    if (static_cast<int64_t>(q_norm.size()) != s.head_dim || static_cast<int64_t>(k_norm.size()) != s.head_dim)
      throw Error("attention_inputs: the q and k norms must be one head wide (" + std::to_string(s.head_dim) + ")");
    const int64_t* pos = row_positions(seqs, qg.rows);
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::attention_inputs(ptr<A>(qg), ptr<A>(k), qg.rows, s.heads, s.kv_heads, s.head_dim, q_norm.data(),
                             k_norm.data(), eps, s.rotary_dim, inv_freq(s), pos, ptr<A>(q), ptr<A>(gate), stream_);
    });
  }

  void attention(int64_t layer, std::span<const SeqSlice> seqs, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttentionShape& s, Tensor& out) override {
    const int64_t nh = s.heads, nkv = s.kv_heads, hd = s.head_dim;
    const int64_t* pos = row_positions(seqs, q.rows);
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      for (const SeqSlice& sq : seqs) {
        CudaState& st = state_of(sq);
        // a recording's caches were made big enough before it began (decode_step)
        if (!st.reserve(sq.position + sq.rows, !recording_)) throw Error("a KV cache would move inside a recorded step");
        st.set_length(layer, sq.position + sq.rows);
        CudaState::Layer& L = st.layer(layer);
        auto* K = static_cast<A*>(L.keys.mem.get());
        auto* V = static_cast<A*>(L.values.mem.get());
        kv_append(K, V, ptr<A>(k) + sq.row * nkv * hd, ptr<A>(v) + sq.row * nkv * hd, sq.rows, nkv * hd, pos + sq.row,
                  stream_);
        // a recording serves every position it has room for
        const int64_t p_last = recording_ ? recording_->last_position : sq.position + sq.rows - 1;
        const size_t scratch_n = attention_scratch_floats(sq.rows, p_last, nh, nkv, hd);
        Tensor scratch = scratch_n ? buffer(1, static_cast<int64_t>(scratch_n), DType::F32) : Tensor{};
        cuda::attention(ptr<A>(q) + sq.row * nh * hd, sq.rows, pos + sq.row, p_last, K, V, nh, nkv, hd,
                        1.0f / std::sqrt(static_cast<float>(hd)), static_cast<float*>(scratch.data),
                        ptr<A>(out) + sq.row * nh * hd, stream_);
      }
    });
  }

  void sigmoid_mul(Tensor& x, const Tensor& gate) override {
    act([&](auto tag) {
      using A = typename decltype(tag)::type;
      cuda::sigmoid_mul(ptr<A>(x), ptr<A>(gate), x.numel(), stream_);
    });
  }

  // A step of a shape seen the step before is recorded as a CUDA graph and
  // replayed from then on: the host then queues one copy of the ids and
  // positions and one launch instead of every kernel of the step.
  Tensor decode_step(std::span<const int32_t> ids, std::span<const SeqSlice> seqs, const void* program,
                     const std::function<Tensor()>& queue) override {
    if (!step_graphs_ || route_log_ || recording_) return queue();
    const int64_t n = static_cast<int64_t>(ids.size());
    // room for this step in every cache: a growth moves them, which the key shows
    for (const SeqSlice& q : seqs) state_of(q).reserve(q.position + q.rows);
    std::vector<uint64_t> key = {reinterpret_cast<uintptr_t>(program), static_cast<uint64_t>(n)};
    for (const SeqSlice& q : seqs) {
      const CudaState& st = state_of(q);
      key.insert(key.end(), {st.serial(), st.generation(), static_cast<uint64_t>(q.row), static_cast<uint64_t>(q.rows)});
    }
    StepGraph* g = nullptr;
    for (const auto& x : graphs_)
      if (x->key == key) g = x.get();
    if (!g) {
      const bool again = key == last_key_;
      last_key_ = key;
      if (!again) return queue();  // a shape met once is not worth the recording
      g = record(std::move(key), n, seqs, queue);
    }
    std::vector<uint8_t> in(g->input_bytes());
    auto* pos = reinterpret_cast<int64_t*>(in.data());
    auto* id = reinterpret_cast<int32_t*>(pos + n);
    std::copy(ids.begin(), ids.end(), id);
    fill_positions(seqs, pos);
    if (!staging_->copy(g->inputs.data, in.data(), in.size(), stream_))
      throw Error("a recorded step's inputs do not fit a staging slot");
    check(cudaGraphLaunch(g->exec, stream_), "replaying a recorded decode step");
    count_operation();
    g->used = ++graph_clock_;
    for (const SeqSlice& q : seqs) state_of(q).set_length(q.position + q.rows);
    return g->out;
  }

  std::vector<int32_t> pick_tokens(const Tensor& logits, std::span<const TokenPick> picks) override {
    const int64_t n = logits.rows, V = logits.cols;
    if (static_cast<int64_t>(picks.size()) != n)
      throw Error("pick_tokens: " + std::to_string(picks.size()) + " picks for " + std::to_string(n) + " rows");
    std::vector<PickParams> params;
    std::vector<PickAdjust> adjust;
    std::vector<int32_t> start = {0};
    for (const TokenPick& p : picks) {
      params.push_back({p.temperature, p.top_p, p.min_p, p.u, p.top_k});
      for (const LogitAdjust& a : p.adjust) {
        if (a.id < 0 || a.id >= V) throw Error("pick_tokens: an adjustment of token " + std::to_string(a.id) + " outside the vocabulary");
        adjust.push_back({a.id, a.bias, a.subtract, a.repeated ? 1 : 0, p.repetition_penalty});
      }
      start.push_back(static_cast<int32_t>(adjust.size()));
    }
    Tensor rows = logits;
    if (logits.dtype == DType::BF16) {
      rows = buffer(n, V, DType::F32);
      to_float(ptr<bf16>(logits), n * V, static_cast<float*>(rows.data), stream_);
    }
    auto d_params = staged(params.data(), params.size() * sizeof(PickParams));
    auto d_adjust = staged(adjust.data(), adjust.size() * sizeof(PickAdjust));
    auto d_start = staged(start.data(), start.size() * sizeof(int32_t));
    Tensor work = buffer(n, V, DType::F32), ids = buffer(1, n, DType::I32);
    cuda::pick_tokens(static_cast<const float*>(rows.data), n, V, static_cast<const PickParams*>(d_params.data),
                      static_cast<const PickAdjust*>(d_adjust.data), static_cast<const int32_t*>(d_start.data),
                      static_cast<float*>(work.data), static_cast<int32_t*>(ids.data), stream_);
    std::vector<int32_t> out(static_cast<size_t>(n));
    wait("pick_tokens");  // first, as in to_host
    check(copy_async(out.data(), ids.data, out.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_), "pick_tokens");
    return out;
  }

 private:
  // Keyed by the router's device address; the entry holds the router's
  // memory, so the address cannot be reused by another block while the entry
  // exists.
  struct ExpertTables {
    std::shared_ptr<const void> router;
    std::shared_ptr<void> mem;
    const DevMatrix *gate, *up, *down;  // [E + 1]: the experts, then the shared one
    int64_t max_inter;
    bool chunked = false;  // every matrix read in chunks of `format`
    WeightFormat format = WeightFormat::F32;
  };

  // Blocks until the stream's work is done, the time counted as waiting.
  void wait(const char* what) {
    if (recording_) throw Error(std::string("the host cannot wait for the device inside a recorded step: ") + what);
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaStreamSynchronize(stream_), what);
    waited_ns_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::steady_clock::now() - t0)
                                                   .count()),
                         std::memory_order_relaxed);
  }

  // Runs fn with a tag whose ::type is the activation type.
  template <class F>
  void act(F&& fn) const {
    if (act_ == DType::BF16)
      fn(std::type_identity<bf16>{});
    else
      fn(std::type_identity<float>{});
  }

  template <class A>
  static A* ptr(const Tensor& t) {
    const DType want = std::is_same_v<A, bf16> ? DType::BF16 : DType::F32;
    if (t.device != Device::Cuda || t.dtype != want)
      throw Error(std::string("the CUDA backend was given a tensor of ") + std::string(dtype_name(t.dtype)) + " on the " +
                  device_name(t.device) + " where it keeps " + std::string(dtype_name(want)) + " on the GPU");
    return static_cast<A*>(t.data);
  }

  std::shared_ptr<void> upload(const void* host, size_t bytes) {
    auto mem = device_block(pool_, bytes);
    check(cudaMemcpy(mem.get(), host, bytes, cudaMemcpyHostToDevice), "upload");
    return mem;
  }

  // Small host data copied to the device for one launch (ids, positions),
  // through pinned memory so the host does not wait for the copy.
  Tensor staged(const void* host, size_t bytes) {
    const int64_t words = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
    if (recording_) {
      // Data every replay reads as it is now, copied once on the side into a
      // block of its own: a pooled block may have served an earlier node of
      // the recording, which would overwrite it on every replay.
      auto mem = device_block(recording_->arena, std::max<size_t>(bytes, 1));
      recording_->constants.push_back(mem);
      check(cudaMemcpyAsync(mem.get(), host, bytes, cudaMemcpyHostToDevice, side_), "staging a recorded step");
      check(cudaStreamSynchronize(side_), "staging a recorded step");
      Tensor t;
      t.device = Device::Cuda;
      t.rows = 1;
      t.cols = words;
      t.data = mem.get();
      t.owner = mem;
      return t;
    }
    Tensor t = buffer(1, words, DType::F32);
    if (bytes && !staging_->copy(t.data, host, bytes, stream_)) {
      check(copy_async(t.data, host, bytes, cudaMemcpyHostToDevice, stream_), "staging");
      wait("staging");  // the host buffer may go once this returns
    }
    return t;
  }

  const float* inv_freq(const AttentionShape& s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto key = std::make_pair(s.rope_theta, s.rotary_dim);
    auto it = inv_freq_.find(key);
    if (it == inv_freq_.end()) {
      const std::vector<float> v = cpu::rope_inv_freq(s.rope_theta, s.rotary_dim);  // the CPU's very numbers
      it = inv_freq_.emplace(key, upload(v.data(), v.size() * sizeof(float))).first;
    }
    return static_cast<const float*>(it->second.get());
  }

  const ExpertTables& tables(const ExpertWeights& w) {
    std::lock_guard<std::mutex> lock(mu_);
    const void* key = w.router->data;
    if (auto it = tables_.find(key); it != tables_.end()) return it->second;
    const size_t E = w.gate.size();
    std::vector<DevMatrix> all;
    int64_t max_inter = w.shared_gate->rows;
    for (const auto* set : {&w.gate, &w.up, &w.down}) {
      for (size_t e = 0; e < E; ++e) all.push_back(dev((*set)[e]));
      all.push_back(dev(set == &w.gate ? *w.shared_gate : set == &w.up ? *w.shared_up : *w.shared_down));
    }
    for (size_t e = 0; e < E; ++e) max_inter = std::max(max_inter, w.gate[e].rows);
    ExpertTables t;
    t.chunked = max_inter % 8 == 0 &&
                common_format(static_cast<int64_t>(all.size()), [&](int64_t i) -> const DevMatrix& { return all[i]; },
                              &t.format);
    t.router = w.router->owner;
    t.mem = upload(all.data(), all.size() * sizeof(DevMatrix));
    const auto* base = static_cast<const DevMatrix*>(t.mem.get());
    t.gate = base;
    t.up = base + (E + 1);
    t.down = base + 2 * (E + 1);
    t.max_inter = max_inter;
    return tables_.emplace(key, std::move(t)).first->second;
  }

  void replay_or_record(int32_t* ids, float* weights, int64_t T, int64_t k, int64_t per) {
    std::vector<int32_t> hid(static_cast<size_t>(T * per));
    std::vector<float> hw(static_cast<size_t>(T * per));
    check(copy_async(hid.data(), ids, hid.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_), "route");
    check(copy_async(hw.data(), weights, hw.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_), "route");
    wait("route");
    std::vector<int32_t> ex(static_cast<size_t>(T * k));
    std::vector<float> wt(static_cast<size_t>(T * k));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < k; ++j) {
        ex[t * k + j] = hid[t * per + j];
        wt[t * k + j] = hw[t * per + j];
      }
    route_log_->apply(ex, wt);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < k; ++j) {
        hid[t * per + j] = ex[t * k + j];
        hw[t * per + j] = wt[t * k + j];
      }
    check(copy_async(ids, hid.data(), hid.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream_), "route");
    check(copy_async(weights, hw.data(), hw.size() * sizeof(float), cudaMemcpyHostToDevice, stream_), "route");
    wait("route");
  }

  // Records queue()'s work on the stream as a graph for `key`, keeping at
  // most kGraphs recordings (the least recently run goes first).
  static constexpr size_t kGraphs = 4;
  StepGraph* record(std::vector<uint64_t> key, int64_t n, std::span<const SeqSlice> seqs,
                    const std::function<Tensor()>& queue) {
    auto g = std::make_unique<StepGraph>();
    g->key = std::move(key);
    g->rows = n;
    g->arena = std::make_shared<Pool>(device_, true);
    for (const SeqSlice& q : seqs) g->last_position = std::max(g->last_position, state_of(q).capacity_rows() - 1);
    g->last_position = std::min<int64_t>(g->last_position, int64_t{1} << 40);  // no attention layer: no bound needed
    recording_ = g.get();
    g->inputs = buffer(1, static_cast<int64_t>((g->input_bytes() + 3) / 4), DType::F32);
    recording_here = true;
    cudaGraph_t graph = nullptr;
    auto stop = [&] {
      recording_ = nullptr;
      recording_here = false;
    };
    try {
      check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "recording a decode step");
      try {
        g->out = queue();
      } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
      }
      check(cudaStreamEndCapture(stream_, &graph), "recording a decode step");
    } catch (...) {
      stop();
      throw;
    }
    stop();
    const cudaError_t e = cudaGraphInstantiate(&g->exec, graph, 0);
    cudaGraphDestroy(graph);
    check(e, "instantiating a recorded decode step");
    if (graphs_.size() >= kGraphs) {
      auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) { return a->used < b->used; });
      wait("retiring a recorded step");  // it may still run
      graphs_.erase(oldest);
    }
    graphs_.push_back(std::move(g));
    return graphs_.back().get();
  }

  // The absolute position of each of a call's rows, in device memory: the
  // recording's inputs inside a recorded step, else staged once and reused
  // by the calls that follow with the same positions (every rope and
  // attention of a step).
  const int64_t* row_positions(std::span<const SeqSlice> seqs, int64_t rows) {
    if (recording_) {
      if (rows != recording_->rows) throw Error("positions: not the recorded step's rows");
      return recording_->positions();
    }
    std::vector<int64_t> pos(static_cast<size_t>(rows));
    fill_positions(seqs, pos.data());
    if (pos != positions_host_ || !positions_dev_.data) {
      positions_dev_ = staged(pos.data(), pos.size() * sizeof(int64_t));
      positions_host_ = std::move(pos);
    }
    return static_cast<const int64_t*>(positions_dev_.data);
  }

  int device_;
  DType act_;
  bool step_graphs_;
  std::string name_;
  cudaStream_t stream_ = nullptr, side_ = nullptr;  // side: copies made while a step is recorded
  StepGraph* recording_ = nullptr;
  std::vector<std::unique_ptr<StepGraph>> graphs_;
  std::vector<uint64_t> last_key_;  // the last step's shape
  uint64_t graph_clock_ = 0;
  std::vector<int64_t> positions_host_;
  Tensor positions_dev_;
  std::unique_ptr<Staging> staging_;
  std::atomic<uint64_t> waited_ns_{0};  // made once the device is current: its events belong to it
  std::shared_ptr<Pool> pool_;
  std::mutex mu_;
  std::map<std::pair<double, int64_t>, std::shared_ptr<void>> inv_freq_;
  std::unordered_map<const void*, ExpertTables> tables_;
};

}  // namespace

bool device_present(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? std::string(cudaGetErrorString(e)) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  return true;
}

std::shared_ptr<Backend> make_backend(int ordinal, DType activations, bool step_graphs) {
  std::string why;
  if (!device_present(&why)) throw Error("no CUDA GPU to run on (" + why + ")");
  return std::make_shared<CudaBackend>(ordinal, activations, step_graphs);
}

}  // namespace lily::cuda
