// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
// The Engine (include/poplar/Engine.hpp), compiled once into the mirror's library.
#include <cstring>
#include <map>

#include <poplar/Engine.hpp>

namespace poplar {

Engine::Engine(const Graph &graph, const program::Program &prog, const OptionFlags &)
    : Engine(graph, std::vector<program::Program>{prog}) {}

Engine::Engine(const Graph &graph, const std::vector<program::Program> &progs, const OptionFlags &)
    : state_(graph.einc_state()), programs_(progs) {
  check_graph();
}

Engine::~Engine() = default;

void Engine::run(unsigned prog, const std::string &) {
  if (prog >= programs_.size()) throw poplar_error("Engine::run: no program " + std::to_string(prog));
  run_node(*programs_[prog].einc_node());
}

void Engine::writeTensor(StringRef handle, const void *begin, const void *end) {
  const Tensor &t = stream(handle, true);
  check_bytes(handle, t, begin, end);
  auto &s = *t.einc_storage();
  std::size_t w = s.type.einc_size();
  for (std::size_t i = 0; i < t.numElements(); ++i)
    std::memcpy(s.element(t.einc_elements()[i]), static_cast<const unsigned char *>(begin) + i * w, w);
}

void Engine::readTensor(StringRef handle, void *begin, void *end) {
  const Tensor &t = stream(handle, false);
  check_bytes(handle, t, begin, end);
  auto &s = *t.einc_storage();
  std::size_t w = s.type.einc_size();
  for (std::size_t i = 0; i < t.numElements(); ++i)
    std::memcpy(static_cast<unsigned char *>(begin) + i * w, s.element(t.einc_elements()[i]), w);
}

void Engine::check_graph() const {
  for (const auto &s : state_->variables)
    for (std::size_t i = 0; i < s->numElements(); ++i)
      if (s->tiles[i] < 0)
        throw poplar_error("element " + std::to_string(i) + " of tensor '" + s->name +
                           "' is not mapped to a tile (Graph::setTileMapping)");
  std::map<unsigned, std::vector<const einc::VertexInstance *>> by_set;
  for (const auto &v : state_->vertices) {
    if (v->tile < 0) throw poplar_error("a vertex of type '" + v->type + "' is not mapped to a tile");
    for (const auto &[name, field] : v->fields)
      if (!field->ready())
        throw poplar_error("field '" + name + "' of a vertex of type '" + v->type + "' is not connected or set");
    by_set[v->computeSet].push_back(v.get());
  }
  for (const auto &[cs, vertices] : by_set) {
    check_races(cs, vertices);
    check_tile_memory(cs, vertices);
  }
}

// The fields of one compute set's vertices on a tile must fit the tile's memory (the
// codelets' local arrays are not seen here; einc's printer counts those too).
void Engine::check_tile_memory(unsigned cs, const std::vector<const einc::VertexInstance *> &vertices) const {
  std::map<int, std::size_t> used;
  for (const auto *v : vertices)
    for (const auto &[name, field] : v->fields) used[v->tile] += field->bytes();
  for (const auto &[tile, bytes] : used)
    if (bytes > state_->target.getBytesPerTile())
      throw poplar_error("tile " + std::to_string(tile) + " needs " + std::to_string(bytes) +
                         " bytes for the fields of compute set '" + state_->computeSets[cs] + "', more than its " +
                         std::to_string(state_->target.getBytesPerTile()));
}

// The IPU stores 32-bit words: two vertices writing narrower elements of one word race
// too (the mirror takes every variable to start on a word boundary). Writers are kept per
// element and per word of each variable, so the check is linear in the accesses.
void Engine::check_races(unsigned cs, const std::vector<const einc::VertexInstance *> &vertices) const {
  std::map<const einc::Storage *, std::vector<long>> writer, word_writer;  // -1: none
  auto owner = [](std::map<const einc::Storage *, std::vector<long>> &table, const einc::Storage *s,
                  std::size_t count) -> std::vector<long> & {
    std::vector<long> &v = table[s];
    if (v.empty()) v.assign(count, -1);
    return v;
  };
  std::vector<einc::Access> accesses;
  for (std::size_t k = 0; k < vertices.size(); ++k) {
    accesses.clear();
    for (const auto &[name, field] : vertices[k]->fields) field->accesses(accesses);
    for (const einc::Access &a : accesses) {
      if (!a.writes) continue;
      std::size_t size = a.storage->type.einc_size();
      long &w = owner(writer, a.storage, a.storage->tiles.size())[a.element];
      if (w >= 0 && w != static_cast<long>(k))
        throw poplar_error(race(cs, "both write", vertices[w], vertices[k], a));
      w = static_cast<long>(k);
      if (size >= 4) continue;
      long &word = owner(word_writer, a.storage, a.storage->tiles.size() * size / 4 + 1)[a.element * size / 4];
      if (word >= 0 && word != static_cast<long>(k))
        throw poplar_error(race(cs, "both write the 32-bit word of", vertices[word], vertices[k], a));
      word = static_cast<long>(k);
    }
  }
  for (std::size_t k = 0; k < vertices.size(); ++k) {
    accesses.clear();
    for (const auto &[name, field] : vertices[k]->fields) field->accesses(accesses);
    for (const einc::Access &a : accesses) {
      auto it = writer.find(a.storage);
      if (a.writes || it == writer.end()) continue;
      long w = it->second[a.element];
      if (w >= 0 && w != static_cast<long>(k))
        throw poplar_error(race(cs, "one reads what the other writes", vertices[k], vertices[w], a));
    }
  }
}

std::string Engine::race(unsigned cs, const char *what, const einc::VertexInstance *a,
                         const einc::VertexInstance *b, const einc::Access &at) const {
  return "vertices of types '" + a->type + "' and '" + b->type + "' in compute set '" + state_->computeSets[cs] +
         "' race: " + what + " element " + std::to_string(at.element) + " of tensor '" + at.storage->name + "'";
}

void Engine::run_node(const Node &node) {
  switch (node.kind) {
    case Node::Kind::Sequence:
      for (const auto &child : node.children) run_node(*child);
      break;
    case Node::Kind::Repeat:
      for (unsigned i = 0; i < node.count; ++i) run_node(*node.children.at(0));
      break;
    case Node::Kind::Copy: {
      std::size_t w = node.src.elementType().einc_size();
      std::vector<unsigned char> staged(node.src.numElements() * w);
      auto &s = *node.src.einc_storage();
      auto &d = *node.dst.einc_storage();
      for (std::size_t i = 0; i < node.src.numElements(); ++i)
        std::memcpy(staged.data() + i * w, s.element(node.src.einc_elements()[i]), w);
      for (std::size_t i = 0; i < node.dst.numElements(); ++i)
        std::memcpy(d.element(node.dst.einc_elements()[i]), staged.data() + i * w, w);
      break;
    }
    case Node::Kind::Execute:
      execute(node.computeSet);
      break;
  }
}

// One vertex after another, each filled, run and written back: the same as filling all
// first, since no vertex of a compute set reads what another writes (check_races).
void Engine::execute(unsigned cs) {
  for (const auto &v : state_->vertices) {
    if (v->computeSet != cs) continue;
    for (auto &[name, field] : v->fields) field->gather();
    if (!v->run())
      throw poplar_error("a vertex of type '" + v->type + "' in compute set '" + state_->computeSets[cs] +
                         "' returned false");
    for (auto &[name, field] : v->fields) field->scatter();
  }
}

const Tensor &Engine::stream(const std::string &handle, bool write) const {
  auto it = state_->streams.find(handle);
  if (it == state_->streams.end() || it->second.second != write)
    throw poplar_error(std::string("no host ") + (write ? "write" : "read") + " stream named '" + handle + "'");
  return it->second.first;
}

void Engine::check_bytes(const std::string &handle, const Tensor &t, const void *begin, const void *end) {
  std::size_t bytes =
      static_cast<std::size_t>(static_cast<const unsigned char *>(end) - static_cast<const unsigned char *>(begin));
  if (bytes != t.numElements() * t.elementType().einc_size())
    throw poplar_error("stream '" + handle + "': " + std::to_string(bytes) + " bytes for a tensor of " +
                       std::to_string(t.numElements() * t.elementType().einc_size()));
}

}  // namespace poplar
