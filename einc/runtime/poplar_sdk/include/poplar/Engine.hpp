// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
//
// The Engine checks what Poplar's graph compiler would reject (unmapped tensors and
// vertices, unconnected fields, a tile whose vertices' fields in one compute set exceed its
// memory) and what would race on the IPU (two vertices of one
// compute set writing one element or one 32-bit word, or one reading what another
// writes), then runs the
// program on the CPU: for Execute(cs), every vertex's fields are filled, every vertex
// computes (workers of a MultiVertex one after another), and outputs are written back.
// Defined once, in the mirror's library (src/Engine.cpp).
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <poplar/Device.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/exceptions.hpp>

namespace poplar {

class Engine {
 public:
  Engine(const Graph &graph, const program::Program &prog, const OptionFlags & = {});
  Engine(const Graph &graph, const std::vector<program::Program> &progs, const OptionFlags & = {});
  ~Engine();

  void load(const Device &) {}
  void run(unsigned prog = 0, const std::string & = "");
  void writeTensor(StringRef handle, const void *begin, const void *end);
  void readTensor(StringRef handle, void *begin, void *end);

 private:
  using Node = program::einc_detail::Node;

  void check_graph() const;
  void check_tile_memory(unsigned cs, const std::vector<const einc::VertexInstance *> &vertices) const;
  void check_races(unsigned cs, const std::vector<const einc::VertexInstance *> &vertices) const;
  std::string race(unsigned cs, const char *what, const einc::VertexInstance *a, const einc::VertexInstance *b,
                   const einc::Access &at) const;
  void run_node(const Node &node);
  void execute(unsigned cs);
  const Tensor &stream(const std::string &handle, bool write) const;
  static void check_bytes(const std::string &handle, const Tensor &t, const void *begin, const void *end);

  std::shared_ptr<einc::GraphState> state_;
  std::vector<program::Program> programs_;
};

}  // namespace poplar
