#include "lily/io/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "lily/error.h"

namespace lily {

namespace {

// GGUF's metadata value types.
enum WrittenValueType : uint32_t { kTypeU32 = 4, kTypeI32 = 5, kTypeF32 = 6, kTypeBool = 7, kTypeString = 8, kTypeArray = 9 };

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // the format is little-endian, as every host Lily runs on
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

uint64_t padded(uint64_t n) { return (n + GgufWriter::kAlignment - 1) / GgufWriter::kAlignment * GgufWriter::kAlignment; }

}  // namespace

void GgufWriter::key(const std::string& k, uint32_t type) {
  put_string(kv_, k);
  put<uint32_t>(kv_, type);
  ++kv_count_;
}

void GgufWriter::add_uint32(const std::string& k, uint32_t v) { key(k, kTypeU32), put(kv_, v); }
void GgufWriter::add_int32(const std::string& k, int32_t v) { key(k, kTypeI32), put(kv_, v); }
void GgufWriter::add_float32(const std::string& k, float v) { key(k, kTypeF32), put(kv_, v); }
void GgufWriter::add_bool(const std::string& k, bool v) { key(k, kTypeBool), put<uint8_t>(kv_, v ? 1 : 0); }
void GgufWriter::add_string(const std::string& k, const std::string& v) { key(k, kTypeString), put_string(kv_, v); }

void GgufWriter::add_strings(const std::string& k, const std::vector<std::string>& v) {
  key(k, kTypeArray);
  put<uint32_t>(kv_, kTypeString);
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_string(kv_, s);
}

void GgufWriter::add_int32s(const std::string& k, const std::vector<int32_t>& v) {
  key(k, kTypeArray);
  put<uint32_t>(kv_, kTypeI32);
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put(kv_, x);
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                            std::function<std::string()> produce) {
  int64_t block_elems = 0, block_bytes = 0;
  if (!ggml_block_layout(type, &block_elems, &block_bytes)) throw Error("tensor '" + name + "': unknown ggml type");
  if (shape.empty() || shape.size() > 4) throw Error("tensor '" + name + "' must have 1 to 4 dimensions");
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) throw Error("tensor '" + name + "' has a dimension of " + std::to_string(d));
    n *= d;
  }
  if (shape[0] % block_elems != 0)
    throw Error("tensor '" + name + "': rows of " + std::to_string(shape[0]) + " do not split into " +
                ggml_type_name(type) + " blocks of " + std::to_string(block_elems));
  tensors_.push_back({name, type, std::move(shape), static_cast<uint64_t>(n / block_elems * block_bytes), std::move(produce)});
}

void GgufWriter::write(const std::string& path) const {
  std::set<std::string> names;
  for (const Tensor& t : tensors_)
    if (!names.insert(t.name).second) throw Error("tensor '" + t.name + "' is added twice");
  std::string head = "GGUF";
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kv_count_);
  head += kv_;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, offset);
    offset += padded(t.nbytes);
  }
  head.resize(padded(head.size()), '\0');

  const std::string part = path + ".partial";
  std::ofstream out(part, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write " + part);
  auto fail = [&](const std::string& why) {
    out.close();
    std::remove(part.c_str());
    throw Error(why);
  };
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  for (const Tensor& t : tensors_) {
    std::string bytes;
    try {
      bytes = t.produce();
    } catch (const Error& e) {
      fail(e.what());
    }
    if (bytes.size() != t.nbytes)
      fail("tensor '" + t.name + "' came to " + std::to_string(bytes.size()) + " bytes, not the " +
           std::to_string(t.nbytes) + " its type and shape call for");
    bytes.resize(padded(bytes.size()), '\0');
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) fail("cannot write " + part + " (disk full?)");
  }
  out.close();
  if (!out) fail("cannot write " + part);
  std::error_code ec;
  std::filesystem::rename(part, path, ec);
  if (ec) fail("cannot rename " + part + " to " + path + ": " + ec.message());
}

}  // namespace lily
