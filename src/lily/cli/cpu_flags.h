// Command-line flags that choose how the CPU backend holds and multiplies
// the weights, shared by every command that runs the model.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lily::cli {

// Products with 4- and 8-bit weights round their inputs to int8 (AVX-512
// VNNI or AVX2 for decode, AMX tiles for prompts) by default where the CPU
// has such a kernel, as the fast engines do with quantized weights;
// --float-activations keeps the exact float path, the reference every fast
// path is tested against.
struct CpuFlags {
  bool int8_activations = false;   // --int8-activations: insist (an error without a kernel)
  bool float_activations = false;  // --float-activations
  bool no_mmap = false;            // --no-mmap

  void add_to(CLI::App* app);
  // Applies the choices process-wide; throws lily::Error when this CPU cannot
  // take them (int8 activations without AVX-512 VNNI).
  void apply() const;
  // The choices in effect (after apply) as command-line arguments for a child process, with a leading space.
  std::string as_args() const;
  // The choices in effect (after apply), e.g. "int8 activations; weights read into memory (--no-mmap)".
  std::string describe() const;
};

}  // namespace lily::cli
