// Command-line flags that choose how the CPU backend runs: its threads, its
// instruction-set level, whether 4- and 8-bit products round their inputs to
// int8, and how the weights are held. Shared by every command that runs the
// model; the choices become the CPU backend's context (cpu::CpuContext).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "lily/backend/cpu/cpu_context.h"

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
  bool no_read_ahead = false;      // --no-read-ahead
  int threads = 0;                 // --threads (0: every hardware thread)
  std::string isa;                 // --cpu-isa (empty: LILY_CPU_ISA, else the best the CPU has)

  void add_to(CLI::App* app);
  // The CPU backend's options; throws lily::Error for flags that exclude each other.
  cpu::CpuOptions options() const;
  // Applies what is process-wide (how weights are held); call before loading.
  void apply() const;
  // The flags as given, as command-line arguments for a child process, with a leading space.
  std::string as_args() const;
  // What these flags choose on this CPU, e.g. "avx512vnni, 2 threads, int8 activations; weights read into memory (--no-mmap)".
  std::string describe() const;
};

}  // namespace lily::cli
