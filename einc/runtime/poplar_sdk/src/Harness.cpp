// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
// The host program of every kernel library (include/poplar/EincHarness.hpp).
#include <cstdio>
#include <exception>
#include <string>

#include <poplar/EincHarness.hpp>
#include <poplar/Engine.hpp>
#include <poplar/IPUModel.hpp>

namespace poplar {
namespace einc {

namespace {

// The codelets, the buffers' variables and the kernel's graph.
std::vector<Tensor> build(const Harness &harness, Graph &graph, program::Sequence &prog) {
  graph.addCodelets("kernel.cpp");
  std::vector<Tensor> buffers;
  const std::size_t *dims = harness.dims;
  for (std::size_t k = 0; k < harness.count; ++k) {
    const HarnessBuffer &b = harness.buffers[k];
    buffers.push_back(graph.addVariable(*b.type, ArrayRef<std::size_t>(dims, b.rank), b.name));
    dims += b.rank;
  }
  harness.build(graph, buffers, prog);
  return buffers;
}

}  // namespace

int describe_harness(const Harness &harness, char *out, std::size_t size) {
  try {
    Graph graph(IPUModel("ipu2").createDevice().getTarget(), harness.types);
    program::Sequence prog;
    build(harness, graph, prog);
    std::snprintf(out, size, "%s", describe(graph).c_str());
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(out, size, "%s", e.what());
    return 1;
  }
}

int run_harness(const Harness &harness, void *const *host, char *error, std::size_t error_size) {
  using Role = HarnessBuffer::Role;
  try {
    IPUModel model("ipu2");
    Device device = model.createDevice();
    Graph graph(device.getTarget(), harness.types);
    program::Sequence prog;
    std::vector<Tensor> buffers = build(harness, graph, prog);
    for (std::size_t k = 0; k < harness.count; ++k) {
      const HarnessBuffer &b = harness.buffers[k];
      if (b.role == Role::Input) graph.createHostWrite(b.name, buffers[k]);
      else if (b.role == Role::Output) graph.createHostRead(b.name, buffers[k]);
    }
    Engine engine(graph, prog);
    engine.load(device);
    for (std::size_t k = 0; k < harness.count; ++k) {
      const HarnessBuffer &b = harness.buffers[k];
      if (b.role == Role::Input) engine.writeTensor(b.name, host[k], static_cast<const char *>(host[k]) + b.bytes);
    }
    engine.run(0);
    for (std::size_t k = 0; k < harness.count; ++k) {
      const HarnessBuffer &b = harness.buffers[k];
      if (b.role == Role::Output) engine.readTensor(b.name, host[k], static_cast<char *>(host[k]) + b.bytes);
    }
  } catch (const std::exception &e) {
    std::snprintf(error, error_size, "%s", e.what());
    return 1;
  }
  return 0;
}

}  // namespace einc
}  // namespace poplar
