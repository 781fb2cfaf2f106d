// `--device cpu|cuda|auto`: where a command runs the model. The CPU is the
// default (the reference); auto takes the GPU when there is one.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "lily/backend/backend.h"
#include "lily/cli/cpu_flags.h"

namespace lily::cli {

struct DeviceFlag {
  std::string name = "cpu";
  bool no_step_graphs = false;  // --no-step-graphs

  void add_to(CLI::App* app);
  Device device() const;
  // The backend; a clear error where the device is missing. The CPU backend
  // runs under `cpu`'s choices (the defaults when null).
  std::shared_ptr<Backend> backend(const CpuFlags* cpu = nullptr) const;
  std::string as_args() const { return " --device " + name + (no_step_graphs ? " --no-step-graphs" : ""); }
};

}  // namespace lily::cli
