#include "lily/io/gguf.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>

#include "lily/error.h"

namespace lily {

namespace {

// Far above any real file: a 248k-token vocabulary with its merges and
// scores holds about a million array elements.
constexpr uint64_t kMaxArrayElements = uint64_t(16) << 20;
constexpr uint64_t kMaxTensors = 1 << 20;
constexpr uint64_t kMaxKeys = 1 << 16;
constexpr uint64_t kMaxString = uint64_t(64) << 20;
constexpr int kMaxArrayDepth = 4;

enum ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, U64 = 10,
  I64 = 11, F64 = 12,
};

struct Layout {
  GgmlType type;
  const char* name;
  int64_t elems, bytes;
};

constexpr Layout kLayouts[] = {
    {GgmlType::F32, "F32", 1, 4},          {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},      {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},      {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},      {GgmlType::Q8_1, "Q8_1", 32, 36},
    {GgmlType::Q2_K, "Q2_K", 256, 84},     {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},    {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66}, {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98}, {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},  {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},   {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},            {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},          {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},          {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},        {GgmlType::TQ1_0, "TQ1_0", 256, 54},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66},   {GgmlType::MXFP4, "MXFP4", 32, 17},
};

// Indexed by type number: Matrix::row_bytes asks for every row it reads.
const Layout* layout_of(GgmlType t) {
  static const std::array<const Layout*, 64> by_type = [] {
    std::array<const Layout*, 64> a{};
    for (const Layout& l : kLayouts) a[static_cast<uint32_t>(l.type)] = &l;
    return a;
  }();
  const uint32_t i = static_cast<uint32_t>(t);
  return i < by_type.size() ? by_type[i] : nullptr;
}

// Reads the file's bytes in order, each read checked against the end.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path) : p_(data), end_(data + size), path_(path) {}

  template <class T>
  T scalar(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
    return v;
  }

  std::string string(const char* what) {
    const uint64_t n = scalar<uint64_t>(what);
    if (n > kMaxString) fail(std::string(what) + " claims " + std::to_string(n) + " bytes");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  size_t offset(const uint8_t* base) const { return static_cast<size_t>(p_ - base); }
  [[noreturn]] void fail(const std::string& why) const { throw Error(path_ + ": " + why); }

 private:
  void need(uint64_t n, const char* what) const {
    if (n > remaining()) fail(std::string("the file ends inside ") + what + " (truncated?)");
  }
  const uint8_t* p_;
  const uint8_t* end_;
  const std::string& path_;
};

GgufValue read_value(Cursor& c, uint32_t type, const std::string& key, int depth, uint64_t& elements) {
  GgufValue out;
  switch (type) {
    case U8: out.v = uint64_t(c.scalar<uint8_t>(key.c_str())); break;
    case I8: out.v = int64_t(c.scalar<int8_t>(key.c_str())); break;
    case U16: out.v = uint64_t(c.scalar<uint16_t>(key.c_str())); break;
    case I16: out.v = int64_t(c.scalar<int16_t>(key.c_str())); break;
    case U32: out.v = uint64_t(c.scalar<uint32_t>(key.c_str())); break;
    case I32: out.v = int64_t(c.scalar<int32_t>(key.c_str())); break;
    case U64: out.v = c.scalar<uint64_t>(key.c_str()); break;
    case I64: out.v = c.scalar<int64_t>(key.c_str()); break;
    case F32: out.v = double(c.scalar<float>(key.c_str())); break;
    case F64: out.v = c.scalar<double>(key.c_str()); break;
    case BOOL: {
      const uint8_t b = c.scalar<uint8_t>(key.c_str());
      if (b > 1) c.fail("metadata '" + key + "': a bool holds " + std::to_string(b));
      out.v = b == 1;
      break;
    }
    case STRING: out.v = c.string(key.c_str()); break;
    case ARRAY: {
      if (depth >= kMaxArrayDepth) c.fail("metadata '" + key + "': arrays nested deeper than " + std::to_string(kMaxArrayDepth));
      const uint32_t elem = c.scalar<uint32_t>(key.c_str());
      const uint64_t n = c.scalar<uint64_t>(key.c_str());
      // Each element takes at least a byte, and all arrays together are bounded.
      if (n > c.remaining() || (elements += n) > kMaxArrayElements)
        c.fail("metadata '" + key + "': an array of " + std::to_string(n) + " elements is more than the file or the " +
               "limit of " + std::to_string(kMaxArrayElements) + " elements holds");
      GgufValue::Array a;
      a.reserve(static_cast<size_t>(n));
      for (uint64_t i = 0; i < n; ++i) a.push_back(read_value(c, elem, key, depth + 1, elements));
      out.v = std::move(a);
      break;
    }
    default: c.fail("metadata '" + key + "' has the unknown value type " + std::to_string(type));
  }
  return out;
}

}  // namespace

bool ggml_block_layout(GgmlType t, int64_t* block_elems, int64_t* block_bytes) {
  const Layout* l = layout_of(t);
  if (!l) return false;
  *block_elems = l->elems;
  *block_bytes = l->bytes;
  return true;
}

std::string ggml_type_name(GgmlType t) {
  const Layout* l = layout_of(t);
  return l ? l->name : "type " + std::to_string(static_cast<uint32_t>(t));
}

int64_t GgufValue::as_int(const std::string& key) const {
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > uint64_t(INT64_MAX)) throw Error("GGUF metadata '" + key + "' is out of range");
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  throw Error("GGUF metadata '" + key + "' must be an integer");
}

double GgufValue::as_float(const std::string& key) const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (std::holds_alternative<uint64_t>(v) || std::holds_alternative<int64_t>(v)) return static_cast<double>(as_int(key));
  throw Error("GGUF metadata '" + key + "' must be a number");
}

const std::string& GgufValue::as_string(const std::string& key) const {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  throw Error("GGUF metadata '" + key + "' must be a string");
}

const GgufValue::Array& GgufValue::as_array(const std::string& key) const {
  if (const auto* a = std::get_if<Array>(&v)) return *a;
  throw Error("GGUF metadata '" + key + "' must be an array");
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

GgufFile::GgufFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  const uint8_t* base = file_->data();
  Cursor c(base, file_->size(), file_->path());
  if (c.remaining() < 4 || std::memcmp(base, "GGUF", 4) != 0) c.fail("not a GGUF file (no GGUF magic)");
  c.scalar<uint32_t>("the magic");
  version_ = c.scalar<uint32_t>("the version");
  if (version_ != 2 && version_ != 3)
    c.fail("GGUF version " + std::to_string(version_) + " is not supported (versions 2 and 3 are)");
  const uint64_t n_tensors = c.scalar<uint64_t>("the tensor count");
  const uint64_t n_keys = c.scalar<uint64_t>("the metadata count");
  if (n_tensors > kMaxTensors) c.fail("claims " + std::to_string(n_tensors) + " tensors");
  if (n_keys > kMaxKeys) c.fail("claims " + std::to_string(n_keys) + " metadata keys");
  uint64_t elements = 0;
  for (uint64_t i = 0; i < n_keys; ++i) {
    std::string key = c.string("a metadata key");
    const uint32_t type = c.scalar<uint32_t>("a metadata type");
    GgufValue value = read_value(c, type, key, 0, elements);
    if (!metadata_.emplace(key, std::move(value)).second) c.fail("the metadata key '" + key + "' appears twice");
  }
  uint64_t alignment = 32;
  if (const GgufValue* a = find("general.alignment")) {
    const int64_t v = a->as_int("general.alignment");
    if (v <= 0 || v > (1 << 20) || (v & (v - 1)) != 0)
      c.fail("general.alignment is " + std::to_string(v) + ", not a power of two up to 1 MiB");
    alignment = static_cast<uint64_t>(v);
  }
  struct Info {
    std::string name;
    std::vector<int64_t> shape;
    GgmlType type;
    uint64_t offset;
  };
  std::vector<Info> infos;
  infos.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Info t;
    t.name = c.string("a tensor name");
    const uint32_t n_dims = c.scalar<uint32_t>("a tensor's dimension count");
    if (n_dims == 0 || n_dims > 4) c.fail("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (1 to 4)");
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = c.scalar<uint64_t>("a tensor's dimensions");
      if (n == 0 || n > (uint64_t(1) << 40)) c.fail("tensor '" + t.name + "' has a dimension of " + std::to_string(n));
      t.shape.push_back(static_cast<int64_t>(n));
    }
    t.type = static_cast<GgmlType>(c.scalar<uint32_t>("a tensor's type"));
    t.offset = c.scalar<uint64_t>("a tensor's offset");
    infos.push_back(std::move(t));
  }
  const uint64_t data_start = (c.offset(base) + alignment - 1) / alignment * alignment;
  const uint64_t size = file_->size();
  for (Info& t : infos) {
    const Layout* l = layout_of(t.type);
    if (!l)
      c.fail("tensor '" + t.name + "' has the unknown type " + std::to_string(static_cast<uint32_t>(t.type)));
    if (t.shape[0] % l->elems != 0)
      c.fail("tensor '" + t.name + "': its rows of " + std::to_string(t.shape[0]) + " are not whole " + l->name +
             " blocks of " + std::to_string(l->elems));
    unsigned __int128 n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    const unsigned __int128 bytes = n / static_cast<uint64_t>(l->elems) * static_cast<uint64_t>(l->bytes);
    if (t.offset % alignment != 0)
      c.fail("tensor '" + t.name + "' starts at offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
             std::to_string(alignment));
    if (data_start + t.offset > size || bytes > size - data_start - t.offset)
      c.fail("tensor '" + t.name + "' (" + l->name + ", " + std::to_string(static_cast<uint64_t>(n)) +
             " elements) lies past the end of the file (truncated?)");
    GgufTensor out;
    out.name = std::move(t.name);
    out.type = t.type;
    out.shape = std::move(t.shape);
    out.data = base + data_start + t.offset;
    out.nbytes = static_cast<size_t>(bytes);
    out.file = &file_->path();
    tensors_.push_back(std::move(out));
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::unique_ptr<GgufModel> GgufModel::open(const std::string& path) {
  auto m = std::unique_ptr<GgufModel>(new GgufModel());
  static const std::regex split_name(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::smatch match;
  std::vector<std::string> parts{path};
  if (std::regex_match(path, match, split_name)) {
    const int count = std::stoi(match[3].str());
    if (count < 1 || std::stoi(match[2].str()) < 1 || std::stoi(match[2].str()) > count)
      throw Error(path + ": a split GGUF name needs part numbers from 00001 to its count");
    parts.clear();
    for (int i = 1; i <= count; ++i) {
      char suffix[32];
      std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", i, count);
      parts.push_back(match[1].str() + suffix);
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    m->files_.push_back(std::make_unique<GgufFile>(parts[i]));
    const GgufFile& f = *m->files_.back();
    if (parts.size() > 1) {
      if (const GgufValue* no = f.find("split.no"); no && no->as_int("split.no") != static_cast<int64_t>(i))
        throw Error(parts[i] + ": split.no says part " + std::to_string(no->as_int("split.no") + 1) + ", the name says " +
                    std::to_string(i + 1));
      if (const GgufValue* n = f.find("split.count"); n && n->as_int("split.count") != static_cast<int64_t>(parts.size()))
        throw Error(parts[i] + ": split.count is " + std::to_string(n->as_int("split.count")) + ", the name says " +
                    std::to_string(parts.size()));
    }
    for (const GgufTensor& t : f.tensors())
      if (!m->index_.emplace(t.name, &t).second)
        throw Error(parts[i] + ": the tensor '" + t.name + "' is also in an earlier part");
  }
  return m;
}

const GgufTensor* GgufModel::tensor(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace lily
