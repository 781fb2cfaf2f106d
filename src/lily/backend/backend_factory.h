// Makes the backend for a device. The CPU is always there; the CUDA backend
// exists when Lily was built with the CUDA toolkit and a GPU is present,
// otherwise asking for it is an error that says which is missing.
#pragma once

#include <memory>
#include <string>

#include "lily/backend/backend.h"
#include "lily/backend/cpu/cpu_context.h"

namespace lily {

// `cpu`: the CPU backend's options (ISA level, threads, int8), unused for a GPU.
std::shared_ptr<Backend> make_backend(Device device, const cpu::CpuOptions& cpu = {});

// Whether make_backend(device) can succeed here; `why` says why not.
bool device_available(Device device, std::string* why = nullptr);

// "cpu", "cuda" or "auto" (the GPU when there is one, else the CPU).
Device parse_device(const std::string& name);

}  // namespace lily
