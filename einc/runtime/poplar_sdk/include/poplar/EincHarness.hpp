// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
//
// Mirror-only: the host program einc/runtime/poplar.py generates for a kernel calls these
// with its buffers, its einc_build_graph and its vertex types; they are defined once, in the
// mirror's library (src/Harness.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>
#include <poplar/Type.hpp>

namespace poplar {
namespace einc {

// One buffer of the launch manifest: a variable of `type` and of the `rank` dimensions that
// follow the previous buffers' in the harness's table of dimensions, named `name`; the host
// writes it (Input), reads it (Output) or neither (Temp), `bytes` bytes at a time.
struct HarnessBuffer {
  enum class Role { Input, Output, Temp };
  const char *name;
  const Type *type;
  unsigned rank;
  Role role;
  std::size_t bytes;
};

using BuildGraph = void (*)(Graph &graph, const std::vector<Tensor> &buffers, program::Sequence &prog);

// The program of one kernel library: its vertex types, its graph and its buffers (`count`
// of them, their dimensions one after another in `dims`).
struct Harness {
  const VertexType *types;
  BuildGraph build;
  const HarnessBuffer *buffers;
  std::size_t count;
  const std::size_t *dims;
};

// Build the graph on an IPU model ("ipu2"), write the inputs from `host` (one pointer per
// buffer, null for temps), run the program once, read the outputs: 0, or 1 with the error's
// message in `error`.
int run_harness(const Harness &harness, void *const *host, char *error, std::size_t error_size);

// The graph described (describe(const Graph &)) without running it: 0, or 1 with the error's message.
int describe_harness(const Harness &harness, char *out, std::size_t size);

}  // namespace einc
}  // namespace poplar
