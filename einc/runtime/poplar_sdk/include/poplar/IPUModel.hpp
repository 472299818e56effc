// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <string>

#include <poplar/Device.hpp>

namespace poplar {

class IPUModel {
 public:
  explicit IPUModel(const char *ipuVersion = "ipu2") : version(ipuVersion) {}
  Device createDevice() const;  // src/Device.cpp
  std::string version;
  unsigned numIPUs = 1;
  unsigned tilesPerIPU = 0;  // 0: the architecture's count
};

}  // namespace poplar
