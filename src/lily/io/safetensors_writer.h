// Writes safetensors files: used by tools that produce checkpoints and by
// tests that need well-formed (or deliberately broken) inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <map>
#include <string>
#include <vector>

#include "lily/io/dtype.h"

namespace lily {

class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, size_t nbytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // Writes all tensors in name order; the header is padded to 8 bytes as the reference writer does.
  // (A SafetensorsStreamWriter does the writing.)
  void write(const std::string& path) const;

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes a safetensors file whose tensors are too large to hold in memory
// together: all names, dtypes and shapes are declared first (so the header
// can be written), then each tensor's bytes are produced in declared order.
class SafetensorsStreamWriter {
 public:
  void declare(const std::string& name, DType dtype, std::vector<int64_t> shape);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // `produce(i, bytes, out)` must write exactly `bytes`, the declared size of tensor i.
  void write(const std::string& path, const std::function<void(size_t, size_t, std::ostream&)>& produce) const;
  size_t total_bytes() const;

 private:
  struct Decl {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    size_t bytes;
  };
  std::vector<Decl> decls_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace lily
