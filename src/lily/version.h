// The engine's version, as `lily --version` and the APIs that ask report it.
#pragma once

namespace lily {
inline constexpr const char* kVersion = "0.1.0";
}
