// The next token of one row of logits under a TokenPick (backend.h): the
// plain form every backend's pick is tested against.
#pragma once

#include <cstdint>
#include <span>

#include "lily/backend/backend.h"

namespace lily {

int32_t pick_token(std::span<const float> logits, const TokenPick& pick);
// Applies pick.adjust to a row of logits in place (bias, repetition penalty, subtraction).
void apply_adjustments(std::span<float> logits, const TokenPick& pick);

}  // namespace lily
