#include "lily/cli/device_flag.h"

#include "lily/backend/backend_factory.h"

namespace lily::cli {

void DeviceFlag::add_to(CLI::App* app) {
  app->add_option("--device", name, "where the model runs: cpu, cuda, or auto (the GPU when there is one)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
}

Device DeviceFlag::device() const { return parse_device(name); }

std::shared_ptr<Backend> DeviceFlag::backend(const CpuFlags* cpu) const {
  return make_backend(device(), cpu ? cpu->options() : cpu::CpuOptions{});
}

}  // namespace lily::cli
