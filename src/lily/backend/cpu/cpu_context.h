// What the CPU kernels may use, handed down from the backend to every kernel
// call: the highest vector instruction set, the worker threads, and whether
// products with 4- and 8-bit weights round their inputs to int8. Nothing of it
// is process-wide, so two backends in one process (or one test) can run
// different paths side by side, and each path can be tested on a CPU that
// also has the faster ones.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lily::cpu {

class ThreadPool;

// The instruction-set levels the kernels are written for, each including the
// ones before it:
// - Portable: plain C++ (what an Arm or old x86 CPU runs);
// - Avx2: AVX2 with FMA and F16C (float kernels 8 wide; int8 products by 16-bit madd);
// - Avx512: AVX-512 F/BW/VL (float kernels 16 wide);
// - Avx512Vnni: and VNNI (int8 products by byte dot instructions);
// - Amx: and AMX tiles (int8 prompt products on tiles);
// and on 64-bit Arm, after Portable (which is NEON there):
// - ArmDot: the SDOT byte dot products (Armv8.2 DotProd; int8 products);
// - ArmI8mm: and the SMMLA/USMMLA 2 x 8 x 2 byte matrix products (int8 prompt tiles).
// The order holds within one architecture only: an x86 CPU never has the Arm
// levels, nor an Arm CPU the x86 ones, so ask cpu_has() rather than compare.
enum class Isa { Portable, Avx2, Avx512, Avx512Vnni, Amx, ArmDot, ArmI8mm };

const char* isa_name(Isa isa);
// "portable", "avx2", "avx512", "avx512vnni" or "amx"; nullopt for anything else.
std::optional<Isa> parse_isa(std::string_view name);
// The highest level this CPU (and, for AMX, the operating system) offers.
Isa best_isa();
// Every level this CPU can run, lowest first.
std::vector<Isa> isas_here();
// Whether this CPU can run kernels of that level.
bool cpu_has(Isa isa);
// Whether a level has int8 products (every one but Portable).
inline bool has_int8_kernels(Isa isa) { return isa != Isa::Portable; }

struct CpuContext {
  Isa isa = Isa::Portable;
  bool int8 = false;  // only where the ISA has an int8 kernel (Avx2 and above)
  std::shared_ptr<ThreadPool> pool;

  ThreadPool& threads() const { return *pool; }
  // Prompt products go to AMX tiles.
  bool amx() const { return int8 && isa == Isa::Amx; }
  // e.g. "avx512vnni, 2 threads, int8 activations"
  std::string describe() const;
};

struct CpuOptions {
  int threads = 0;  // 0: every hardware thread
  // Default: LILY_CPU_ISA when set, else the best this CPU has.
  std::optional<Isa> isa;
  // Off: exact float products. Auto: int8 where the ISA has a kernel. On: int8, an error where it has none.
  enum class Int8 { Off, Auto, On } int8 = Int8::Off;
};

// The context for these options; throws lily::Error naming the problem when
// the CPU lacks the ISA asked for or int8 is insisted on without a kernel.
CpuContext make_cpu_context(const CpuOptions& options = {});

}  // namespace lily::cpu
