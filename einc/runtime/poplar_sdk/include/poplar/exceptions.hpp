// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <stdexcept>
#include <string>

namespace poplar {

// Constructors and destructors are defined in the mirror's library (src/Errors.cpp), so the
// classes' vtables and type information live there once.
struct poplar_error : std::runtime_error {
  explicit poplar_error(const std::string &message);
  ~poplar_error() override;
};

struct graph_connection_error : poplar_error {
  using poplar_error::poplar_error;
  ~graph_connection_error() override;
};

struct graph_cycle_error : poplar_error {
  using poplar_error::poplar_error;
  ~graph_cycle_error() override;
};

}  // namespace poplar
