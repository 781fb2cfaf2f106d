// Where the running program's binary lies, so an installed Lily finds the
// data installed beside it however the prefix was moved.
#pragma once

#include <filesystem>

namespace lily {

// The absolute path of the running executable; empty where the system does not say.
std::filesystem::path executable_path();

}  // namespace lily
