// model.safetensors.index.json naming shards (one real shard is present).
#include <filesystem>

#include "fuzz_support.h"
#include "lily/error.h"
#include "lily/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool ready = [] {
    // a valid one-tensor shard the index may point at
    const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    file += header + std::string(4, '\0');
    lily::fuzz::scratch_file("model-00001-of-00001.safetensors", file);
    return true;
  }();
  (void)ready;
  lily::fuzz::scratch_file("model.safetensors.index.json", lily::fuzz::text(data, size));
  try {
    lily::SafetensorsArchive::open_dir(lily::fuzz::scratch_dir());
  } catch (const lily::Error&) {
  }
  return 0;
}
