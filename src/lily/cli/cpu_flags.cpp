#include "lily/cli/cpu_flags.h"

#include "lily/backend/cpu/thread_pool.h"
#include "lily/error.h"
#include "lily/io/mapped_file.h"

namespace lily::cli {

void CpuFlags::add_to(CLI::App* app) {
  app->add_flag("--int8-activations", int8_activations,
                "round the inputs of 4/8-bit products to int8 (the default where the CPU has AVX2 or "
                "AVX-512 VNNI; an error where it has neither)");
  app->add_flag("--float-activations", float_activations,
                "keep activations in float: the exact float path on the CPU (no int8 inputs), fp32 instead of bf16 on a GPU");
  app->add_flag("--no-mmap", no_mmap,
                "read the weights into memory of their own (huge pages) instead of mapping the files: "
                "slower to load, faster to decode");
  app->add_flag("--no-read-ahead", no_read_ahead,
                "do not read a mapped model that fits in memory ahead in the background (its pages are then read "
                "from disk as the first answers touch them)");
  app->add_option("--threads", threads, "CPU worker threads (default: all hardware threads)")
      ->check(CLI::PositiveNumber);
  app->add_option("--cpu-isa", isa,
                  "CPU kernels to use: portable, avx2, avx512, avx512vnni or amx on x86, armdot or armi8mm on Arm "
                  "(default: LILY_CPU_ISA, else the best this CPU has)");
}

cpu::CpuOptions CpuFlags::options() const {
  if (int8_activations && float_activations) throw Error("--int8-activations and --float-activations exclude each other");
  cpu::CpuOptions o;
  o.threads = threads;
  if (!isa.empty()) {
    o.isa = cpu::parse_isa(isa);
    if (!o.isa) throw Error("--cpu-isa " + isa + ": not one of portable, avx2, avx512, avx512vnni, amx, armdot, armi8mm");
  }
  o.int8 = int8_activations ? cpu::CpuOptions::Int8::On
           : float_activations ? cpu::CpuOptions::Int8::Off
                               : cpu::CpuOptions::Int8::Auto;
  return o;
}

void CpuFlags::apply() const {
  (void)options();  // the flags' own errors before anything loads
  set_residency(no_mmap ? Residency::Owned : Residency::Mapped);
  set_read_ahead(!no_read_ahead);
}

std::string CpuFlags::as_args() const {
  std::string a;
  if (int8_activations) a += " --int8-activations";
  if (float_activations) a += " --float-activations";
  if (no_mmap) a += " --no-mmap";
  if (no_read_ahead) a += " --no-read-ahead";
  if (threads > 0) a += " --threads " + std::to_string(threads);
  if (!isa.empty()) a += " --cpu-isa " + isa;
  return a;
}

std::string CpuFlags::describe() const {
  return cpu::make_cpu_context(options()).describe() + (no_mmap ? "; weights read into memory (--no-mmap)" : "");
}

}  // namespace lily::cli
