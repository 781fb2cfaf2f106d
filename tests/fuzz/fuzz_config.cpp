// config.json of a checkpoint.
#include "fuzz_support.h"
#include "lily/error.h"
#include "lily/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    lily::ModelConfig::parse(std::string(lily::fuzz::text(data, size)), "config.json");
  } catch (const lily::Error&) {
  }
  return 0;
}
