// Writes GGUF files (version 3, little-endian, llama.cpp's layout): typed
// metadata, then the tensor infos, then the tensors, each aligned to 32
// bytes. Tensors are produced one at a time while the file is written, so a
// checkpoint of any size is converted with one tensor in memory; the file
// appears under its name only once it is whole (written beside it, then
// renamed).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lily/io/gguf.h"

namespace lily {

class GgufWriter {
 public:
  void add_uint32(const std::string& key, uint32_t v);
  void add_int32(const std::string& key, int32_t v);
  void add_float32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_strings(const std::string& key, const std::vector<std::string>& v);
  void add_int32s(const std::string& key, const std::vector<int32_t>& v);

  // `shape` in ggml's order (the fastest-varying dimension first); `produce`
  // returns the tensor's bytes when the writer reaches it and must return
  // exactly the size the type and shape call for.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                  std::function<std::string()> produce);

  // Throws lily::Error naming the file or the tensor; a partial file is removed.
  void write(const std::string& path) const;

  static constexpr uint64_t kAlignment = 32;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    std::function<std::string()> produce;
  };
  void key(const std::string& k, uint32_t type);
  std::string kv_;
  uint64_t kv_count_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace lily
