// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <string>

#include <poplar/Type.hpp>

namespace poplar {

class Target {
 public:
  Target() = default;
  Target(unsigned numIPUs, unsigned tilesPerIPU, std::string name)
      : numIPUs_(numIPUs), tilesPerIPU_(tilesPerIPU), name_(std::move(name)) {}

  static Target createCPUTarget(bool = false, unsigned numIPUs = 1) { return Target(numIPUs, 1, "cpu"); }
  static Target createIPUTarget(unsigned numIPUs, const std::string &arch = "ipu2") {
    return Target(numIPUs, arch == "ipu1" ? 1216 : 1472, arch);
  }

  unsigned getNumIPUs() const { return numIPUs_; }
  unsigned getTilesPerIPU() const { return tilesPerIPU_; }
  unsigned getNumTiles() const { return numIPUs_ * tilesPerIPU_; }
  unsigned getNumWorkerContexts() const { return 6; }
  unsigned getTypeSize(const Type &type) const { return type.einc_size(); }
  // Elements per 64-bit SIMD vector, as on the IPU.
  unsigned getVectorWidth(const Type &type) const { return 8 / type.einc_size(); }
  unsigned getBytesPerTile() const { return 624 * 1024; }
  std::string getTargetArchString() const { return name_; }

 private:
  unsigned numIPUs_ = 1;
  unsigned tilesPerIPU_ = 1472;
  std::string name_ = "ipu2";
};

}  // namespace poplar
