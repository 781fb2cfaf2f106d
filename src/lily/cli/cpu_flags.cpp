#include "lily/cli/cpu_flags.h"

#include "lily/backend/cpu/int8_dot.h"
#include "lily/error.h"
#include "lily/io/mapped_file.h"

namespace lily::cli {

void CpuFlags::add_to(CLI::App* app) {
  app->add_flag("--int8-activations", int8_activations,
                "decode 4/8-bit weights against int8-rounded inputs (AVX-512 VNNI; faster, slightly lossy)");
  app->add_flag("--no-mmap", no_mmap,
                "read the weights into memory of their own (huge pages) instead of mapping the files: "
                "slower to load, faster to decode");
}

void CpuFlags::apply() const {
  if (!cpu::int8::enable(int8_activations))
    throw Error("--int8-activations needs a CPU with AVX-512 VNNI (avx512vnni, avx512bw, avx512vl); this one has none");
  set_residency(no_mmap ? Residency::Owned : Residency::Mapped);
}

std::string CpuFlags::as_args() const {
  return std::string(int8_activations ? " --int8-activations" : "") + (no_mmap ? " --no-mmap" : "");
}

std::string CpuFlags::describe() const {
  std::string d = int8_activations ? "int8 activations" : "";
  if (no_mmap) d += std::string(d.empty() ? "" : "; ") + "weights read into memory (--no-mmap)";
  return d;
}

}  // namespace lily::cli
