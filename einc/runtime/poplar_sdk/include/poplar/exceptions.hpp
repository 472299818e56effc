// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <stdexcept>
#include <string>

namespace poplar {

struct poplar_error : std::runtime_error {
  explicit poplar_error(const std::string &message) : std::runtime_error(message) {}
};

struct graph_connection_error : poplar_error {
  using poplar_error::poplar_error;
};

struct graph_cycle_error : poplar_error {
  using poplar_error::poplar_error;
};

}  // namespace poplar
