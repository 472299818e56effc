// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <poplar/Target.hpp>

namespace poplar {

class Device {
 public:
  Device() = default;
  explicit Device(Target target) : target_(std::move(target)) {}
  static Device createCPUDevice(unsigned numIPUs = 1) { return Device(Target::createCPUTarget(false, numIPUs)); }
  const Target &getTarget() const { return target_; }
  bool attach() const { return true; }
  void detach() const {}
  unsigned getId() const { return 0; }

 private:
  Target target_;
};

}  // namespace poplar
