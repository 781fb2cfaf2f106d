#include "lily/cli/device_flag.h"

#include "lily/backend/backend_factory.h"

namespace lily::cli {

void DeviceFlag::add_to(CLI::App* app) {
  app->add_option("--device", name, "where the model runs: cpu, cuda, or auto (the GPU when there is one)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
}

Device DeviceFlag::device() const { return parse_device(name); }

std::shared_ptr<Backend> DeviceFlag::backend(const CpuFlags* cpu) const {
  BackendOptions o;
  if (cpu) {
    o.cpu = cpu->options();
    o.float_activations = cpu->float_activations;
  }
  return make_backend(device(), o);
}

}  // namespace lily::cli
