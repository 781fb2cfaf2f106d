#include "lily/backend/backend_factory.h"

#include "lily/backend/cpu/cpu_backend.h"
#include "lily/error.h"
#ifdef LILY_HAVE_CUDA
#include "lily/backend/cuda/cuda_backend.h"
#endif

namespace lily {

bool device_available(Device device, std::string* why) {
  if (device == Device::Cpu) return true;
#ifdef LILY_HAVE_CUDA
  return cuda::device_present(why);
#else
  if (why) *why = "this build of lily has no CUDA backend (build it where the CUDA toolkit is installed)";
  return false;
#endif
}

std::shared_ptr<Backend> make_backend(Device device, const BackendOptions& o) {
  if (device == Device::Cpu) return std::make_shared<cpu::CpuBackend>(cpu::make_cpu_context(o.cpu));
#ifdef LILY_HAVE_CUDA
  return cuda::make_backend(0, o.float_activations ? DType::F32 : DType::BF16, o.step_graphs);
#else
  std::string why;
  device_available(device, &why);
  throw Error(why);
#endif
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  if (name == "auto") return device_available(Device::Cuda) ? Device::Cuda : Device::Cpu;
  throw Error("unknown device '" + name + "' (cpu, cuda or auto)");
}

}  // namespace lily
