// Writes GGUF files byte by byte, as the format describes them: for the
// reader's tests, and for GGUF models built in a test from other fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lily::test {

class GgufBuilder {
 public:
  uint32_t version = 3;
  uint64_t alignment = 32;

  template <class T>
  static void put(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  static void put_str(std::string& s, const std::string& v) {
    put<uint64_t>(s, v.size());
    s += v;
  }
  void key(const std::string& k, uint32_t type) {
    put_str(kv_, k);
    put<uint32_t>(kv_, type);
    ++n_kv_;
  }
  void u32(const std::string& k, uint32_t v) { key(k, 4), put(kv_, v); }
  void i64(const std::string& k, int64_t v) { key(k, 11), put(kv_, v); }
  void f32(const std::string& k, float v) { key(k, 6), put(kv_, v); }
  void boolean(const std::string& k, bool v) { key(k, 7), put<uint8_t>(kv_, v); }
  void str(const std::string& k, const std::string& v) { key(k, 8), put_str(kv_, v); }
  void strings(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9);
    put<uint32_t>(kv_, 8);
    put<uint64_t>(kv_, v.size());
    for (const auto& s : v) put_str(kv_, s);
  }
  void i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9);
    put<uint32_t>(kv_, 5);
    put<uint64_t>(kv_, v.size());
    for (int32_t x : v) put(kv_, x);
  }
  void raw_kv(const std::string& bytes, uint64_t count) { kv_ += bytes, n_kv_ += count; }
  // A tensor; its data is `bytes` (placed at the next aligned offset unless `offset` is given).
  void tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, const std::string& bytes,
              int64_t offset = -1) {
    tensors_.push_back({name, std::move(dims), type, bytes, offset});
  }

  std::string build() const {
    std::string s = "GGUF";
    put(s, version);
    put<uint64_t>(s, tensors_.size());
    put<uint64_t>(s, n_kv_);
    s += kv_;
    std::string data;
    for (const auto& t : tensors_) {
      while (data.size() % alignment) data.push_back('\0');
      put_str(s, t.name);
      put<uint32_t>(s, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) put(s, d);
      put(s, t.type);
      put<uint64_t>(s, t.offset >= 0 ? static_cast<uint64_t>(t.offset) : data.size());
      data += t.bytes;
    }
    while (s.size() % alignment) s.push_back('\0');
    return s + data;
  }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::string bytes;
    int64_t offset;
  };
  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

}  // namespace lily::test
