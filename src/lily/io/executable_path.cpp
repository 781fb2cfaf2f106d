#include "lily/io/executable_path.h"

#include <cstdint>
#include <vector>

#ifdef __APPLE__
#include <mach-o/dyld.h>
#endif

namespace lily {

std::filesystem::path executable_path() {
  std::error_code ec;
#ifdef __APPLE__
  uint32_t size = 0;
  _NSGetExecutablePath(nullptr, &size);
  std::vector<char> buf(size + 1);
  if (_NSGetExecutablePath(buf.data(), &size) != 0) return {};
  auto path = std::filesystem::canonical(buf.data(), ec);
#else
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
#endif
  return ec ? std::filesystem::path() : path;
}

}  // namespace lily
