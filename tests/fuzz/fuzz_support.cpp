#include "fuzz_support.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace lily::fuzz {

std::string scratch_dir() {
  static const std::string dir = [] {
    const std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    const std::string d = base + "/lily-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

std::string scratch_file(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::string bundled_model_dir() {
  // $LILY_FUZZ_MODEL_DIR when the harness runs away from its source tree
  const char* dir = std::getenv("LILY_FUZZ_MODEL_DIR");
  return dir && *dir ? dir : LILY_FUZZ_MODEL_DIR;
}

}  // namespace lily::fuzz
