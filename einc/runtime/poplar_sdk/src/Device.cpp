// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
// Devices and errors (include/poplar/IPUModel.hpp, exceptions.hpp), compiled once into the
// mirror's library.
#include <poplar/IPUModel.hpp>
#include <poplar/exceptions.hpp>

namespace poplar {

Device IPUModel::createDevice() const {
  Target t = Target::createIPUTarget(numIPUs, version);
  if (tilesPerIPU != 0) t = Target(numIPUs, tilesPerIPU, version);
  return Device(t);
}

poplar_error::poplar_error(const std::string &message) : std::runtime_error(message) {}
poplar_error::~poplar_error() = default;
graph_connection_error::~graph_connection_error() = default;
graph_cycle_error::~graph_cycle_error() = default;

}  // namespace poplar
