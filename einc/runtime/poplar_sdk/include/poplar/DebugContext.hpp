// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <string>

namespace poplar {

// Real Poplar records debug information; the mirror keeps the name only.
class DebugContext {
 public:
  DebugContext() = default;
  DebugContext(const char *name) : name_(name) {}
  DebugContext(std::string name) : name_(std::move(name)) {}
  const std::string &getPathName() const { return name_; }

 private:
  std::string name_;
};

}  // namespace poplar
