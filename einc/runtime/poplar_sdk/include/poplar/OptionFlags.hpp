// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <utility>

namespace poplar {

class OptionFlags {
 public:
  OptionFlags() = default;
  OptionFlags(std::initializer_list<std::pair<const std::string, std::string>> init) : options_(init) {}
  void set(const std::string &option, const std::string &value) { options_[option] = value; }
  const std::map<std::string, std::string> &einc_options() const { return options_; }

 private:
  std::map<std::string, std::string> options_;
};

}  // namespace poplar
