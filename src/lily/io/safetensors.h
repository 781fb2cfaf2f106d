// Reader for the safetensors format: an 8-byte little-endian header length, a
// JSON header naming each tensor's dtype, shape and byte range, then the raw
// data. A checkpoint is one file or several shards listed by
// `model.safetensors.index.json`; both are presented as one set of tensors.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lily/io/dtype.h"
#include "lily/io/mapped_file.h"

namespace lily {

// A shape as "[8, 64]", for messages.
std::string shape_string(const std::vector<int64_t>& shape);

// A tensor as it lies in a mapped file; `data` stays valid while the archive lives.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  const std::string* file = nullptr;  // the shard it lives in

  int64_t numel() const;
  std::string shape_string() const;  // "[8, 64]"
};

class SafetensorsFile {
 public:
  // Maps and validates the file: header bounds, JSON, dtypes and that every
  // tensor's byte range lies inside the data and matches its shape.
  explicit SafetensorsFile(const std::string& path);

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return file_->path(); }
  MappedFile& mapping() const { return *file_; }

 private:
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory: `model.safetensors`, or the shards
// named by `model.safetensors.index.json`.
class SafetensorsArchive {
 public:
  static std::unique_ptr<SafetensorsArchive> open_dir(const std::string& dir);

  const TensorView* find(const std::string& name) const;
  const std::map<std::string, const TensorView*>& tensors() const { return index_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

}  // namespace lily
