#include "lily/io/safetensors_writer.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "lily/error.h"

namespace lily {

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                            size_t nbytes) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (static_cast<size_t>(numel) * dtype_size(dtype) != nbytes)
    throw Error("tensor '" + name + "': byte count does not match its shape");
  const auto* p = static_cast<const uint8_t*>(data);
  entries_[name] = Entry{dtype, std::move(shape), std::vector<uint8_t>(p, p + nbytes)};
}

void SafetensorsWriter::write(const std::string& path) const {
  SafetensorsStreamWriter stream;
  std::vector<const Entry*> order;
  for (const auto& [name, e] : entries_) {
    stream.declare(name, e.dtype, e.shape);
    order.push_back(&e);
  }
  for (const auto& [k, v] : metadata_) stream.set_metadata(k, v);
  stream.write(path, [&](size_t i, size_t, std::ostream& out) {
    out.write(reinterpret_cast<const char*>(order[i]->bytes.data()), static_cast<std::streamsize>(order[i]->bytes.size()));
  });
}

void SafetensorsStreamWriter::declare(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  decls_.push_back({name, dtype, std::move(shape), static_cast<size_t>(numel) * dtype_size(dtype)});
}

size_t SafetensorsStreamWriter::total_bytes() const {
  size_t n = 0;
  for (const auto& d : decls_) n += d.bytes;
  return n;
}

void SafetensorsStreamWriter::write(const std::string& path,
                                    const std::function<void(size_t, size_t, std::ostream&)>& produce) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& d : decls_) {
    header[d.name] = {{"dtype", dtype_name(d.dtype)}, {"shape", d.shape}, {"data_offsets", {offset, offset + d.bytes}}};
    offset += d.bytes;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write " + path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (size_t i = 0; i < decls_.size(); ++i) {
    const auto before = out.tellp();
    produce(i, decls_[i].bytes, out);
    if (!out || static_cast<size_t>(out.tellp() - before) != decls_[i].bytes)
      throw Error("failed writing tensor '" + decls_[i].name + "' to " + path);
  }
}

}  // namespace lily
