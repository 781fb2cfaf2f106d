// The streaming check behind response_format json_object: whatever it
// accepts byte by byte is a prefix of JSON, and a completed object parses.
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "lily/text/json_prefix.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lily::JsonPrefix p;
  std::string accepted;
  for (size_t i = 0; i < size; ++i) {
    const std::string_view b = lily::fuzz::text(data + i, 1);
    const bool could = p.accepts(b);
    if (p.push(b) != could) std::abort();
    if (could) accepted += b;
  }
  if (p.complete()) {
    try {
      (void)nlohmann::json::parse(accepted);
    } catch (const nlohmann::json::out_of_range&) {
      // a number beyond double (1e999): valid JSON that nlohmann will not hold
    } catch (const nlohmann::json::exception&) {
      std::abort();
    }
  }
  return 0;
}
