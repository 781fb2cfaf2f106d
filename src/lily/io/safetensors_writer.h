// Writes safetensors files: used by tools that produce checkpoints and by
// tests that need well-formed (or deliberately broken) inputs.
#pragma once

#include <cstdint>
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

}  // namespace lily
