#include "lily/cli/cpu_flags.h"

#include "lily/backend/cpu/int8_dot.h"
#include "lily/error.h"
#include "lily/io/mapped_file.h"

namespace lily::cli {

void CpuFlags::add_to(CLI::App* app) {
  app->add_flag("--int8-activations", int8_activations,
                "round the inputs of 4/8-bit products to int8 (the default where the CPU has AVX2 or "
                "AVX-512 VNNI; an error where it has neither)");
  app->add_flag("--float-activations", float_activations,
                "keep the inputs of 4/8-bit products in float: exact, slower");
  app->add_flag("--no-mmap", no_mmap,
                "read the weights into memory of their own (huge pages) instead of mapping the files: "
                "slower to load, faster to decode");
}

void CpuFlags::apply() const {
  if (int8_activations && float_activations) throw Error("--int8-activations and --float-activations exclude each other");
  if (int8_activations && !cpu::int8::enable(true))
    throw Error("--int8-activations needs a CPU with AVX2 (and FMA, F16C) or AVX-512 VNNI; this one has neither");
  if (!int8_activations) cpu::int8::enable(!float_activations && cpu::int8::available());
  set_residency(no_mmap ? Residency::Owned : Residency::Mapped);
}

std::string CpuFlags::as_args() const {
  return std::string(cpu::int8::enabled() ? " --int8-activations" : " --float-activations") +
         (no_mmap ? " --no-mmap" : "");
}

std::string CpuFlags::describe() const {
  return std::string(cpu::int8::enabled() ? "int8 activations" : "float activations") +
         (no_mmap ? "; weights read into memory (--no-mmap)" : "");
}

}  // namespace lily::cli
