#include "lily/io/safetensors.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "lily/error.h"
#include "lily/io/bounded_input.h"

namespace lily {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string TensorView::shape_string() const { return lily::shape_string(shape); }

namespace {
// A header larger than this is not a checkpoint header (real ones are a few MB).
constexpr uint64_t kMaxHeaderBytes = 256ull << 20;
// An index lists every tensor once: a few MB for the largest models.
constexpr size_t kMaxIndexBytes = size_t(64) << 20;
}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_unique<MappedFile>(path)) {
  const size_t size = file_->size();
  if (size < 8) throw Error(path + ": truncated safetensors file (" + std::to_string(size) + " bytes, no header)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file_->data()[i];
  if (header_len > kMaxHeaderBytes || header_len > size - 8)
    throw Error(path + ": malformed safetensors header: header length " + std::to_string(header_len) +
                " does not fit in a file of " + std::to_string(size) + " bytes");
  const char* hbegin = reinterpret_cast<const char*>(file_->data() + 8);
  const json header = parse_json(std::string_view(hbegin, header_len), path + ": malformed safetensors header");
  if (!header.is_object()) throw Error(path + ": malformed safetensors header: not a JSON object");

  const uint8_t* data_begin = file_->data() + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (v.is_object())
        for (auto m = v.begin(); m != v.end(); ++m)
          if (m.value().is_string()) metadata_[m.key()] = m.value().get<std::string>();
      continue;
    }
    auto bad = [&](const std::string& why) {
      return Error(path + ": malformed safetensors header: tensor '" + name + "' " + why);
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      throw bad("needs dtype, shape and data_offsets");
    TensorView t;
    t.name = name;
    if (!v["dtype"].is_string() || !parse_dtype(v["dtype"].get<std::string>(), &t.dtype))
      throw bad("has unknown dtype " + v["dtype"].dump());
    if (!v["shape"].is_array()) throw bad("has a shape that is not a list");
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) throw bad("has a negative or non-integer dimension");
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / dim) throw bad("is impossibly large");
      numel *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad("has malformed data_offsets");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e) throw bad("has data_offsets in the wrong order");
    if (e > data_size)
      throw Error(path + ": truncated safetensors file: tensor '" + name + "' ends at byte " + std::to_string(e) +
                  " of the data but the file holds only " + std::to_string(data_size) + " bytes of data");
    if (e - b != numel * dtype_size(t.dtype))
      throw bad("holds " + std::to_string(e - b) + " bytes but shape " + t.shape_string() + " of " +
                std::string(dtype_name(t.dtype)) + " needs " + std::to_string(numel * dtype_size(t.dtype)));
    t.data = data_begin + b;
    t.nbytes = e - b;
    t.file = &file_->path();
    tensors_.emplace(name, std::move(t));
  }
}

std::unique_ptr<SafetensorsArchive> SafetensorsArchive::open_dir(const std::string& dir) {
  auto archive = std::make_unique<SafetensorsArchive>();
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  std::vector<std::string> shard_names;
  json weight_map;
  if (fs::exists(index_path)) {
    const json index = parse_json(read_regular_file(index_path.string(), kMaxIndexBytes), index_path.string());
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw Error(index_path.string() + ": has no weight_map object");
    weight_map = index["weight_map"];
    std::set<std::string> seen;
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      if (!it.value().is_string()) throw Error(index_path.string() + ": weight_map entry '" + it.key() + "' is not a file name");
      const std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
        throw Error(index_path.string() + ": shard name '" + shard + "' must be a plain file name");
      if (seen.insert(shard).second) shard_names.push_back(shard);
    }
  } else if (fs::exists(single_path)) {
    shard_names.push_back("model.safetensors");
  } else {
    throw Error(dir + ": no model.safetensors or model.safetensors.index.json");
  }

  for (const auto& shard : shard_names) {
    archive->files_.push_back(std::make_unique<SafetensorsFile>((fs::path(dir) / shard).string()));
    for (const auto& [name, view] : archive->files_.back()->tensors()) {
      if (!archive->index_.emplace(name, &view).second)
        throw Error(dir + ": tensor '" + name + "' appears in more than one shard");
    }
  }
  for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
    const TensorView* t = archive->find(it.key());
    const std::string shard = it.value().get<std::string>();
    if (t == nullptr || fs::path(*t->file).filename() != shard)
      throw Error(index_path.string() + ": lists tensor '" + it.key() + "' in " + shard + ", which does not hold it");
  }
  return archive;
}

const TensorView* SafetensorsArchive::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

}  // namespace lily
