// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <string>

namespace poplar {

using StringRef = const std::string &;

}  // namespace poplar
