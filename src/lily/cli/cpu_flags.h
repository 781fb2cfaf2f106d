// Command-line flags that choose how the CPU backend holds and multiplies
// the weights, shared by every command that runs the model.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lily::cli {

struct CpuFlags {
  bool int8_activations = false;  // --int8-activations
  bool no_mmap = false;           // --no-mmap

  void add_to(CLI::App* app);
  // Applies the choices process-wide; throws lily::Error when this CPU cannot
  // take them (int8 activations without AVX-512 VNNI).
  void apply() const;
  // The same flags as command-line arguments (for a child process), with a leading space.
  std::string as_args() const;
  // A short description for reports ("int8 activations; weights read into memory"), empty for the defaults.
  std::string describe() const;
};

}  // namespace lily::cli
