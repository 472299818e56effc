// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <poplar/DebugContext.hpp>
#include <poplar/Tensor.hpp>

namespace poplar {

class ComputeSet {
 public:
  ComputeSet() = default;
  explicit ComputeSet(unsigned id) : id_(id) {}
  unsigned getId() const { return id_; }

 private:
  unsigned id_ = ~0u;
};

namespace program {

namespace einc_detail {
struct Node {
  enum class Kind { Sequence, Execute, Copy, Repeat } kind;
  std::vector<std::shared_ptr<const Node>> children;  // Sequence and Repeat
  unsigned computeSet = 0;                            // Execute
  Tensor src, dst;                                    // Copy
  unsigned count = 0;                                 // Repeat
};
}  // namespace einc_detail

// The constructors are defined in the mirror's library (src/Program.cpp).
class Program {
 public:
  Program();
  std::shared_ptr<const einc_detail::Node> einc_node() const { return node_; }

 protected:
  explicit Program(std::shared_ptr<einc_detail::Node> node) : node_(std::move(node)) {}
  std::shared_ptr<einc_detail::Node> node_;
};

class Sequence : public Program {
 public:
  Sequence(const DebugContext & = {});
  Sequence(std::initializer_list<Program> programs, const DebugContext & = {});
  // Copies of a Sequence share its node, so adding to one adds to all (as in Poplar).
  void add(const Program &p);
};

class Execute : public Program {
 public:
  explicit Execute(ComputeSet cs, const DebugContext & = {});
};

class Copy : public Program {
 public:
  Copy(const Tensor &src, const Tensor &dst, bool = false, const DebugContext & = {});
};

class Repeat : public Program {
 public:
  Repeat(unsigned count, const Program &body, const DebugContext & = {});
};

}  // namespace program
}  // namespace poplar
