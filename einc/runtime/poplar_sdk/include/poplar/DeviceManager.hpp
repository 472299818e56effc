// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
// There is no IPU hardware behind the mirror: the manager finds no devices.
#pragma once

#include <vector>

#include <poplar/Device.hpp>
#include <poplar/Target.hpp>

namespace poplar {

enum class TargetType { IPU, IPU_MODEL, CPU };

class DeviceManager {
 public:
  static DeviceManager createDeviceManager() { return DeviceManager(); }
  std::vector<Device> getDevices(TargetType = TargetType::IPU, unsigned = 1) const { return {}; }
};

}  // namespace poplar
