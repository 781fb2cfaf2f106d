// The engine's version and the commit it was built from, as `lily --version`
// and the APIs that ask report them. Both are written at build time
// (cmake/build_info.cmake): the version from the project, the commit from git.
#pragma once

#include <string>

namespace lily {

extern const char* const kVersion;  // "0.1.0"
extern const char* const kCommit;   // `git describe` of the source tree, "unknown" outside git

// "lily 0.1.0 (commit 5f8727a1b2c3)"
inline std::string version_line() { return std::string("lily ") + kVersion + " (commit " + kCommit + ")"; }

}  // namespace lily
