// Makes the backend for a device. The CPU is always there; the CUDA backend
// exists when Lily was built with the CUDA toolkit and a GPU is present,
// otherwise asking for it is an error that says which is missing.
#pragma once

#include <memory>
#include <string>

#include "lily/backend/backend.h"
#include "lily/backend/cpu/cpu_context.h"

namespace lily {

struct BackendOptions {
  cpu::CpuOptions cpu;  // the CPU backend's ISA level, threads and int8 choice
  // The GPU keeps activations in bf16 (fp32 accumulation); true keeps them in fp32.
  bool float_activations = false;
  // The GPU records a decode step met twice as a CUDA graph and replays it; false queues every operation.
  bool step_graphs = true;
};

std::shared_ptr<Backend> make_backend(Device device, const BackendOptions& options = {});

// Whether make_backend(device) can succeed here; `why` says why not.
bool device_available(Device device, std::string* why = nullptr);

// "cpu", "cuda" or "auto" (the GPU when there is one, else the CPU).
Device parse_device(const std::string& name);

}  // namespace lily
