// Prompt products with int8 activations on AMX tiles, the prompt half of
// the opt-in --int8-activations path (Intel Xeon from Sapphire Rapids on).
//
// A prompt multiplies every weight by many tokens, so its products are
// bound by arithmetic, not memory: the float path spends most of its time
// converting 4-bit weights to floats and then in 16-wide multiply-adds. Here
// a tile multiply does 16 x 16 x 64 byte products in one instruction, on the
// packed weights unpacked to bytes (never to floats): unsigned weights q in
// the A tile, the tokens' inputs rounded to int8 exactly as the decode path
// rounds them (per group of 64 or 128, step = max |x| / 127) in the B tile.
// Each group's integer sums are then scaled by weight scale x input step and
// the bias term uses the exact float input sum, so the error is the decode
// path's: at most sum over groups of (step / 2) * sum |w|.
//
// A token's outputs depend on nothing but its own inputs (padding tokens of
// a tile are zeros and discarded), so a prompt resumed at a checkpoint is
// computed bit for bit as a fresh one, as the float prompt path guarantees.
#pragma once

#include <cstdint>

#include "lily/backend/cpu/cpu_context.h"
#include "lily/backend/tensor.h"

namespace lily::cpu::amx {

// A matrix the path takes: int8::packed_format, whole groups a row.
bool supports(const Matrix& W);

// y[t, r] = W row r . x[t] for T tokens, as cpu::matmul (the rows split over the pool).
// Only for a context whose amx() holds (Isa::Amx with int8 on).
void matmul(const CpuContext& ctx, const float* x, int64_t T, const Matrix& W, float* y);

}  // namespace lily::cpu::amx
