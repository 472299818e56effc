// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
// The Graph and its vertices (include/poplar/Graph.hpp), compiled once into the mirror's
// library.
#include <algorithm>

#include <poplar/Graph.hpp>

namespace poplar {

namespace einc {

namespace {

// A plain (non-edge) member, set once with Graph::setInitialValue.
class PlainField : public Field {
 public:
  explicit PlainField(const FieldHandle &handle) : handle_(handle) {}
  void connect(const Tensor &) override { throw graph_connection_error("field is a plain value, not an edge"); }
  void set_initial_value(double v) override {
    handle_.set(handle_.plain, v);
    set_ = true;
  }
  bool ready() const override { return set_; }
  std::size_t bytes() const override { return handle_.size; }

 private:
  FieldHandle handle_;
  bool set_ = false;
};

std::vector<std::string> split_names(const char *text) {
  std::vector<std::string> names(1);
  for (const char *c = text; *c; ++c) {
    if (*c == ',') names.emplace_back();
    else if (*c != ' ' && *c != '\t' && *c != '\n') names.back() += *c;
  }
  return names;
}

}  // namespace

VertexInstance::VertexInstance() = default;
VertexInstance::~VertexInstance() = default;

void VertexInstance::einc_init(const char *name, const char *names, const FieldHandle *list, std::size_t count) {
  type = name;
  std::vector<std::string> split = split_names(names);
  for (std::size_t i = 0; i < count; ++i) {
    fields[split[i]] = list[i].edge ? std::shared_ptr<Field>(std::shared_ptr<Field>(), list[i].edge)  // not owned
                                    : std::make_shared<PlainField>(list[i]);
  }
}

std::string describe(const Graph &graph) {
  std::string out;
  const auto &state = *graph.einc_state();
  for (const auto &v : state.vertices) {
    out += state.computeSets[v->computeSet] + "\t" + v->type + "\t" + std::to_string(v->tile);
    for (const auto &[name, field] : v->fields) {
      std::vector<Access> accesses;
      field->accesses(accesses);
      out += "\t" + name + "=";
      if (accesses.empty()) continue;
      std::size_t first = accesses[0].element, last = first, count = 0;
      bool writes = false;
      for (const auto &a : accesses) {
        first = std::min(first, a.element);
        last = std::max(last, a.element);
        count += a.writes ? 0 : 1;
        writes = writes || a.writes;
      }
      if (count == 0) count = accesses.size();
      out += accesses[0].storage->name + ":" + std::to_string(first) + ":" + std::to_string(last) + ":" +
             std::to_string(count) + ":" + (writes ? "w" : "r");
    }
    out += "\n";
  }
  return out;
}

}  // namespace einc

FieldRef FieldRef::operator[](std::size_t i) const {
  return FieldRef(vertex_, &field_->element(i), path_ + "[" + std::to_string(i) + "]");
}

FieldRef VertexRef::operator[](StringRef name) const {
  auto it = vertex_->fields.find(name);
  if (it == vertex_->fields.end())
    throw graph_connection_error("vertex type '" + vertex_->type + "' has no field '" + name +
                                 "' (fields are listed in EINC_POPLAR_VERTEX)");
  return FieldRef(vertex_, it->second.get(), vertex_->type + "." + name);
}

Graph::Graph(const Target &target, const einc::VertexType *vertexTypes)
    : state_(std::make_shared<einc::GraphState>()) {
  state_->target = target;
  state_->vertexTypes = vertexTypes;
}

Graph::~Graph() = default;

void Graph::addCodelets(StringRef source, CodeletFileType, StringRef, StringRef) {
  state_->codelets.push_back(source);  // mirror: codelets are compiled into this program
}

Tensor Graph::addVariable(const Type &type, ArrayRef<std::size_t> shape, const DebugContext &debug) {
  std::vector<std::size_t> s = shape.vec();
  auto storage = std::make_shared<einc::Storage>(type, debug.getPathName(), einc::product(s));
  state_->variables.push_back(storage);
  std::vector<std::size_t> elements(storage->numElements());
  for (std::size_t i = 0; i < elements.size(); ++i) elements[i] = i;
  return Tensor(storage, s, elements);
}

ComputeSet Graph::addComputeSet(const DebugContext &debug) {
  state_->computeSets.push_back(debug.getPathName());
  return ComputeSet(static_cast<unsigned>(state_->computeSets.size() - 1));
}

VertexRef Graph::addVertex(ComputeSet cs, StringRef vertexType) {
  if (cs.getId() >= state_->computeSets.size()) throw poplar_error("addVertex: unknown compute set");
  const einc::VertexType *type = state_->vertexTypes;
  while (type != nullptr && vertexType != type->name) type = type->next;
  if (type == nullptr)
    throw poplar_error("unknown vertex type '" + vertexType + "' (einc's Poplar mirror needs EINC_POPLAR_VERTEX(" +
                       vertexType + ", fields...))");
  std::unique_ptr<einc::VertexInstance> vertex = type->make(*type);
  vertex->computeSet = cs.getId();
  state_->vertices.push_back(std::move(vertex));
  return VertexRef(state_->vertices.back().get(), static_cast<unsigned>(state_->vertices.size() - 1));
}

VertexRef Graph::addVertex(ComputeSet cs, StringRef vertexType,
                           std::initializer_list<std::pair<const std::string, Tensor>> connections) {
  VertexRef v = addVertex(cs, vertexType);
  for (const auto &[field, tensor] : connections) connect(v[field], tensor);
  return v;
}

void Graph::connect(FieldRef field, const Tensor &tensor) {
  try {
    field.einc_field().connect(tensor);
  } catch (const graph_connection_error &e) {
    throw graph_connection_error(field.einc_path() + ": " + e.what());
  }
}

void Graph::connect(FieldRef field, const std::vector<Tensor> &tensors) {
  try {
    field.einc_field().connect_list(tensors);
  } catch (const graph_connection_error &e) {
    throw graph_connection_error(field.einc_path() + ": " + e.what());
  }
}

void Graph::setFieldSize(FieldRef field, std::size_t size) { field.einc_field().set_size(size); }

void Graph::set_initial_value(FieldRef field, double value) {
  try {
    field.einc_field().set_initial_value(value);
  } catch (const graph_connection_error &e) {
    throw graph_connection_error(field.einc_path() + ": " + e.what());
  }
}

void Graph::setTileMapping(VertexRef v, unsigned tile) {
  check_tile(tile);
  v.einc_vertex()->tile = static_cast<int>(tile);
}

void Graph::setTileMapping(const Tensor &t, unsigned tile) {
  check_tile(tile);
  for (std::size_t e : t.einc_elements()) t.einc_storage()->tiles[e] = static_cast<int>(tile);
}

void Graph::createHostWrite(StringRef handle, const Tensor &t, bool) { add_stream(handle, t, true); }
void Graph::createHostRead(StringRef handle, const Tensor &t, bool) { add_stream(handle, t, false); }

void Graph::check_tile(unsigned tile) const {
  if (tile >= state_->target.getNumTiles())
    throw poplar_error("tile " + std::to_string(tile) + " out of range (the target has " +
                       std::to_string(state_->target.getNumTiles()) + " tiles)");
}

void Graph::add_stream(const std::string &handle, const Tensor &t, bool write) {
  if (!state_->streams.emplace(handle, std::make_pair(t, write)).second)
    throw poplar_error("a host stream named '" + handle + "' exists already");
}

}  // namespace poplar
