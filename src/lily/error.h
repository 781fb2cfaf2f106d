// The one exception type Lily throws for bad input or unusable files; its
// message is meant for the user and names what was wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace lily {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace lily
