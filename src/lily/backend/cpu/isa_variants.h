// Kernels written once in plain C++ and compiled for each vector width.
//
// A kernel's body is an always-inline function `NAME_body`; the macro below
// defines NAME_avx512, NAME_avx2 and NAME_portable, each the body compiled
// for its target (the compiler vectorises it to that width), and
// LILY_ISA_DISPATCH calls the one the context's Isa allows. The project
// builds for baseline x86-64, so without this the wide units would go unused;
// unlike target_clones, which picks by what the CPU has, the caller decides,
// so a capped context really runs the narrower code.
#pragma once

#include "lily/backend/cpu/cpu_context.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define LILY_ISA_BODY [[gnu::always_inline]] inline
// AVX2_TARGET: the AVX2 variant's target string ("avx2", or "avx2,fma,f16c" where FMA contraction is wanted).
#define LILY_ISA_VARIANTS(AVX2_TARGET, RET, NAME, PARAMS, ARGS)                              \
  [[gnu::target("avx512f")]] RET NAME##_avx512 PARAMS { return NAME##_body ARGS; }           \
  [[gnu::target(AVX2_TARGET)]] RET NAME##_avx2 PARAMS { return NAME##_body ARGS; }           \
  RET NAME##_portable PARAMS { return NAME##_body ARGS; }
#define LILY_ISA_DISPATCH(ISA, NAME, ARGS)                          \
  do {                                                              \
    if ((ISA) >= ::lily::cpu::Isa::Avx512) return NAME##_avx512 ARGS; \
    if ((ISA) >= ::lily::cpu::Isa::Avx2) return NAME##_avx2 ARGS;     \
    return NAME##_portable ARGS;                                    \
  } while (0)
#else
#define LILY_ISA_BODY inline
#define LILY_ISA_VARIANTS(AVX2_TARGET, RET, NAME, PARAMS, ARGS) \
  RET NAME##_portable PARAMS { return NAME##_body ARGS; }
#define LILY_ISA_DISPATCH(ISA, NAME, ARGS) \
  do {                                     \
    (void)(ISA);                           \
    return NAME##_portable ARGS;           \
  } while (0)
#endif
