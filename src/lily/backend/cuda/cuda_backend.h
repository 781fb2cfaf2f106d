// The CUDA backend: weights uploaded once at bind time in their stored form
// (BF16/F16/F32, or MLX's packed 2..8-bit values with their scales), bf16
// (or fp32) activations with fp32 accumulation and an fp32 recurrent state in
// device memory, sequence states and their prefix-cache snapshots on the
// device, tokens picked on the device. Plain C++: nothing here needs
// the CUDA headers, so the rest of Lily includes it freely.
#pragma once

#include <memory>
#include <string>

#include "lily/backend/backend.h"

namespace lily::cuda {

// The backend on GPU `ordinal` keeping activations in `activations` (BF16 or
// F32), replaying recorded decode steps where `step_graphs` (see
// Backend::decode_step); throws lily::Error when there is no GPU.
std::shared_ptr<Backend> make_backend(int ordinal = 0, DType activations = DType::BF16, bool step_graphs = true);

// Whether a CUDA GPU is there; `why` says why not.
bool device_present(std::string* why = nullptr);

}  // namespace lily::cuda
