// A safetensors file: the 8-byte length, the JSON header, the data.
#include "fuzz_support.h"
#include "lily/error.h"
#include "lily/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lily::fuzz::scratch_file("model.safetensors", lily::fuzz::text(data, size));
  try {
    lily::SafetensorsFile f(path);
  } catch (const lily::Error&) {
  }
  return 0;
}
