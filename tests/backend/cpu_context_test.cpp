// The CPU's instruction-set levels: each architecture's own chain, named the
// way LILY_CPU_ISA and --cpu-isa spell them, and a context refusing a level
// this CPU cannot run whichever architecture it belongs to.
#include "lily/backend/cpu/cpu_context.h"

#include <gtest/gtest.h>

#include "lily/error.h"

namespace lily::cpu {
namespace {

bool arm_level(Isa isa) { return isa == Isa::ArmDot || isa == Isa::ArmI8mm; }

TEST(CpuContext, TheLevelsHereAreOneArchitecturesChain) {
  const std::vector<Isa> here = isas_here();
  ASSERT_FALSE(here.empty());
  EXPECT_EQ(here.front(), Isa::Portable);
  EXPECT_EQ(here.back(), best_isa());
  if (here.size() > 1) {
    EXPECT_TRUE(here[1] == Isa::Avx2 || here[1] == Isa::ArmDot) << isa_name(here[1]);
  }
  for (size_t i = 1; i < here.size(); ++i) {
    if (i > 1) {
      EXPECT_EQ(static_cast<int>(here[i]), static_cast<int>(here[i - 1]) + 1) << "a gap before " << isa_name(here[i]);
    }
    EXPECT_EQ(arm_level(here[i]), arm_level(here.back())) << isa_name(here[i]) << " beside " << isa_name(here.back());
  }
  for (Isa isa : here) EXPECT_TRUE(cpu_has(isa)) << isa_name(isa);
#if defined(__x86_64__)
  EXPECT_FALSE(cpu_has(Isa::ArmDot));
#elif defined(__aarch64__)
  EXPECT_FALSE(cpu_has(Isa::Avx2));
#endif
}

TEST(CpuContext, EveryLevelIsNamedBothWays) {
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni, Isa::Amx, Isa::ArmDot, Isa::ArmI8mm}) {
    const auto parsed = parse_isa(isa_name(isa));
    ASSERT_TRUE(parsed.has_value()) << isa_name(isa);
    EXPECT_EQ(*parsed, isa);
    EXPECT_EQ(has_int8_kernels(isa), isa != Isa::Portable);
  }
  EXPECT_FALSE(parse_isa("neon").has_value());
  EXPECT_FALSE(parse_isa("").has_value());
}

TEST(CpuContext, ALevelOfTheOtherArchitectureIsRefusedByName) {
  CpuOptions o;
  o.threads = 1;
  o.isa = arm_level(best_isa()) ? Isa::Avx2 : Isa::ArmI8mm;
  try {
    make_cpu_context(o);
    FAIL() << "a context for " << isa_name(*o.isa) << " was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(isa_name(*o.isa)), std::string::npos) << e.what();
  }
  o.isa = Isa::Portable;
  EXPECT_EQ(make_cpu_context(o).isa, Isa::Portable);
}

}  // namespace
}  // namespace lily::cpu
