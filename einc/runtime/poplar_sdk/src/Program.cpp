// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
// Programs (include/poplar/Program.hpp), compiled once into the mirror's library.
#include <poplar/Program.hpp>

namespace poplar {
namespace program {

using einc_detail::Node;

namespace {
std::shared_ptr<Node> make(Node node) { return std::make_shared<Node>(std::move(node)); }
}  // namespace

Program::Program() : node_(make(Node{Node::Kind::Sequence, {}})) {}

Sequence::Sequence(const DebugContext &) : Program(make(Node{Node::Kind::Sequence, {}})) {}

Sequence::Sequence(std::initializer_list<Program> programs, const DebugContext &)
    : Program(make(Node{Node::Kind::Sequence, {}})) {
  for (const Program &p : programs) add(p);
}

void Sequence::add(const Program &p) { node_->children.push_back(p.einc_node()); }

Execute::Execute(ComputeSet cs, const DebugContext &) : Program(make(Node{Node::Kind::Execute, {}, cs.getId()})) {}

Copy::Copy(const Tensor &src, const Tensor &dst, bool, const DebugContext &)
    : Program(make(Node{Node::Kind::Copy, {}, 0, src, dst})) {
  if (src.numElements() != dst.numElements() || src.elementType() != dst.elementType())
    throw poplar_error("Copy between tensors of different size or type: " + src.shapeToString() + " " +
                       src.elementType().toString() + " to " + dst.shapeToString() + " " +
                       dst.elementType().toString());
}

Repeat::Repeat(unsigned count, const Program &body, const DebugContext &)
    : Program(make(Node{Node::Kind::Repeat, {body.einc_node()}, 0, {}, {}, count})) {}

}  // namespace program
}  // namespace poplar
