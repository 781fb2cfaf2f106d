// GGUF files (llama.cpp's format, versions 2 and 3, little-endian): the
// metadata key/values and the tensors, read where they lie in the mapped
// file. A model split into parts ("...-00001-of-00003.gguf") opens as one
// set of tensors, and so does an Ollama blob (a GGUF file with no extension).
// Everything read from the file is checked against its size and against
// bounds no real file comes near, with errors that name the file, the key or
// the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "lily/io/mapped_file.h"

namespace lily {

// ggml's tensor types, as numbered in the file.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10, Q3_K = 11,
  Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19,
  IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
  IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

// Elements per block and bytes per block of a type; false for a type number
// this reader does not know.
bool ggml_block_layout(GgmlType t, int64_t* block_elems, int64_t* block_bytes);
std::string ggml_type_name(GgmlType t);

// One metadata value: a scalar, a string, or an array of one element type.
struct GgufValue {
  using Array = std::vector<GgufValue>;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_array() const { return std::holds_alternative<Array>(v); }
  // Integer of any width and signedness; throws lily::Error naming `key` otherwise.
  int64_t as_int(const std::string& key) const;
  double as_float(const std::string& key) const;
  const std::string& as_string(const std::string& key) const;
  const Array& as_array(const std::string& key) const;
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> shape;  // as the file lists it: the fastest-varying dimension first
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  const std::string* file = nullptr;
  int64_t numel() const;
};

class GgufFile {
 public:
  // Opens and checks one file; throws lily::Error naming it.
  explicit GgufFile(const std::string& path);
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const std::string& path() const { return file_->path(); }
  MappedFile& mapping() const { return *file_; }
  const GgufValue* find(const std::string& key) const;

 private:
  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensor> tensors_;
};

// A model in one GGUF file or split into parts: the first part's metadata,
// and the tensors of all parts by name.
class GgufModel {
 public:
  // `path` is the file, or any part of a split model (all parts are opened).
  static std::unique_ptr<GgufModel> open(const std::string& path);
  const GgufFile& first() const { return *files_.front(); }
  const GgufValue* find(const std::string& key) const { return first().find(key); }
  const GgufTensor* tensor(const std::string& name) const;
  const std::map<std::string, const GgufTensor*>& tensors() const { return index_; }
  const std::vector<std::unique_ptr<GgufFile>>& files() const { return files_; }

 private:
  std::vector<std::unique_ptr<GgufFile>> files_;
  std::map<std::string, const GgufTensor*> index_;
};

// Whether the file at `path` starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

}  // namespace lily
