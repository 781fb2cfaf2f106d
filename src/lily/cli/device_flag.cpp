#include "lily/cli/device_flag.h"

#include "lily/backend/backend_factory.h"

namespace lily::cli {

void DeviceFlag::add_to(CLI::App* app) {
  app->add_option("--device", name, "where the model runs: cpu, cuda, or auto (the GPU when there is one)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app->add_flag("--no-step-graphs", no_step_graphs,
                "on the GPU, queue every operation of a decode step instead of replaying the step recorded as a CUDA graph");
}

Device DeviceFlag::device() const { return parse_device(name); }

std::shared_ptr<Backend> DeviceFlag::backend(const CpuFlags* cpu) const {
  BackendOptions o;
  o.step_graphs = !no_step_graphs;
  if (cpu) {
    o.cpu = cpu->options();
    o.float_activations = cpu->float_activations;
  }
  return make_backend(device(), o);
}

}  // namespace lily::cli
