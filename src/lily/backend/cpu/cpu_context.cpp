#include "lily/backend/cpu/cpu_context.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "lily/backend/cpu/thread_pool.h"
#include "lily/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace lily::cpu {

namespace {
constexpr const char* kNames[] = {"portable", "avx2", "avx512", "avx512vnni", "amx", "armdot", "armi8mm"};
constexpr int kLevels = sizeof(kNames) / sizeof(kNames[0]);

#if defined(__x86_64__) && defined(__GNUC__)
bool cpuid_bit(unsigned leaf, unsigned sub, int reg, unsigned bit) {
  unsigned r[4] = {};
  if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}

bool has_amx() {
  constexpr int kEdx = 3;
  if (!cpuid_bit(7, 0, kEdx, 24) || !cpuid_bit(7, 0, kEdx, 25)) return false;  // AMX-TILE, AMX-INT8
#if defined(__linux__)
  // Linux hands out the 8 KiB tile register state only to processes that ask.
  constexpr long kRequestPermission = 0x1023, kTileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
#else
  return false;
#endif
}

Isa detect() {
  __builtin_cpu_init();
  constexpr int kEcx = 2;
  const bool f16c = cpuid_bit(1, 0, kEcx, 29);  // from CPUID itself: clang's __builtin_cpu_supports lacks the name
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)) return Isa::Portable;
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")))
    return Isa::Avx2;
  if (!__builtin_cpu_supports("avx512vnni")) return Isa::Avx512;
  return has_amx() ? Isa::Amx : Isa::Avx512Vnni;
}
#elif defined(__aarch64__) && defined(__linux__)
Isa detect() {
  // the kernel's feature bits (HWCAP_ASIMDDP, HWCAP2_I8MM), spelled out for older headers
  constexpr unsigned long kDotProd = 1ul << 20, kI8mm = 1ul << 13;
  if (!(getauxval(AT_HWCAP) & kDotProd)) return Isa::Portable;
  return getauxval(AT_HWCAP2) & kI8mm ? Isa::ArmI8mm : Isa::ArmDot;
}
#elif defined(__aarch64__) && defined(__APPLE__)
bool sysctl_flag(const char* name) {
  int v = 0;
  size_t size = sizeof(v);
  return sysctlbyname(name, &v, &size, nullptr, 0) == 0 && v != 0;
}
Isa detect() {
  if (!sysctl_flag("hw.optional.arm.FEAT_DotProd")) return Isa::Portable;
  return sysctl_flag("hw.optional.arm.FEAT_I8MM") ? Isa::ArmI8mm : Isa::ArmDot;
}
#else
Isa detect() { return Isa::Portable; }
#endif
}  // namespace

const char* isa_name(Isa isa) { return kNames[static_cast<int>(isa)]; }

std::optional<Isa> parse_isa(std::string_view name) {
  for (int i = 0; i < kLevels; ++i)
    if (name == kNames[i]) return static_cast<Isa>(i);
  return std::nullopt;
}

Isa best_isa() {
  static const Isa isa = detect();  // a fact about the hardware, asked once
  return isa;
}

std::vector<Isa> isas_here() {
  // Portable, then the levels of this CPU's architecture up to its best
  const Isa best = best_isa();
  const Isa first = best >= Isa::ArmDot ? Isa::ArmDot : Isa::Avx2;
  std::vector<Isa> out{Isa::Portable};
  if (best != Isa::Portable)
    for (int i = static_cast<int>(first); i <= static_cast<int>(best); ++i) out.push_back(static_cast<Isa>(i));
  return out;
}

bool cpu_has(Isa isa) {
  for (Isa here : isas_here())
    if (here == isa) return true;
  return false;
}

std::string CpuContext::describe() const {
  return std::string(isa_name(isa)) + ", " + std::to_string(pool ? pool->size() : 0) + " threads, " +
         (int8 ? "int8 activations" : "float activations");
}

CpuContext make_cpu_context(const CpuOptions& o) {
  CpuContext c;
  if (o.isa) {
    c.isa = *o.isa;
  } else if (const char* env = std::getenv("LILY_CPU_ISA"); env && *env) {
    const auto parsed = parse_isa(env);
    if (!parsed)
      throw Error(std::string("LILY_CPU_ISA=") + env +
                  " is not one of portable, avx2, avx512, avx512vnni, amx (x86), armdot, armi8mm (Arm)");
    c.isa = *parsed;
  } else {
    c.isa = best_isa();
  }
  if (!cpu_has(c.isa))
    throw Error(std::string("this CPU cannot run the ") + isa_name(c.isa) + " kernels (the best it has is " +
                isa_name(best_isa()) + ")");
  const bool kernel = has_int8_kernels(c.isa);
  if (o.int8 == CpuOptions::Int8::On && !kernel)
    throw Error("int8 activations need AVX2 (with FMA and F16C) or better, or Arm's DotProd; the kernels here are " +
                std::string(isa_name(c.isa)));
  c.int8 = o.int8 != CpuOptions::Int8::Off && kernel;
  const int n = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  c.pool = std::make_shared<ThreadPool>(n);
  return c;
}

}  // namespace lily::cpu
