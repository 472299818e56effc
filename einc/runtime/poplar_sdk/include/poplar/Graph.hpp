// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
//
// The mirror has no codelet compiler: vertex classes are compiled into the same program
// as the host code, and each class must be registered, after its definition, with
//   EINC_POPLAR_VERTEX(ClassName, field1, field2, ...)
// naming the fields the graph connects or sets (public members; a non-template class at
// global scope). With Graphcore's SDK that macro is defined empty, and addCodelets()
// compiles the codelet source as usual.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <poplar/ArrayRef.hpp>
#include <poplar/DebugContext.hpp>
#include <poplar/Device.hpp>
#include <poplar/Program.hpp>
#include <poplar/StringRef.hpp>
#include <poplar/Target.hpp>
#include <poplar/Tensor.hpp>
#include <poplar/Type.hpp>
#include <poplar/Vertex.hpp>
#include <poplar/exceptions.hpp>

namespace poplar {

enum class CodeletFileType { PreprocessedAsmSource, AsmSource, CSource, CppSource, IrSource, Object, Auto };

namespace einc {

// A plain (non-edge) member, set once with Graph::setInitialValue.
template <class T> class PlainField : public Field {
 public:
  explicit PlainField(T &member) : member_(member) {}
  void connect(const Tensor &) override { throw graph_connection_error("field is a plain value, not an edge"); }
  void set_initial_value(double v) override {
    member_ = static_cast<T>(v);
    set_ = true;
  }
  bool ready() const override { return set_; }
  std::size_t bytes() const override { return sizeof(T); }

 private:
  T &member_;
  bool set_ = false;
};

template <class F> std::shared_ptr<Field> handle(F &field) {
  if constexpr (std::is_base_of_v<Field, F>) {
    return std::shared_ptr<Field>(std::shared_ptr<Field>(), &field);  // not owned
  } else {
    static_assert(std::is_arithmetic_v<F> || std::is_same_v<F, half>,
                  "EINC_POPLAR_VERTEX lists edges and plain arithmetic members only");
    return std::make_shared<PlainField<F>>(field);
  }
}

template <class... F> std::vector<std::shared_ptr<Field>> handles(F &...fields) { return {handle(fields)...}; }

inline std::vector<std::string> split_names(const char *text) {
  std::vector<std::string> names(1);
  for (const char *c = text; *c; ++c) {
    if (*c == ',') names.emplace_back();
    else if (*c != ' ' && *c != '\t' && *c != '\n') names.back() += *c;
  }
  return names;
}

// One vertex of a graph: the codelet object and its fields by name.
class VertexInstance {
 public:
  virtual ~VertexInstance() = default;
  virtual bool run() = 0;  // compute(), or compute(w) for every worker of a MultiVertex
  std::string type;
  unsigned computeSet = 0;
  int tile = -1;
  std::map<std::string, std::shared_ptr<Field>> fields;
};

template <class T> class VertexOf : public VertexInstance {
 public:
  VertexOf(const std::string &name, const std::vector<std::string> &names) {
    type = name;
    std::vector<std::shared_ptr<Field>> list = object_.einc_fields();
    for (std::size_t i = 0; i < names.size(); ++i) fields[names[i]] = list[i];
  }
  bool run() override {
    if constexpr (std::is_base_of_v<MultiVertex, T>) {
      for (unsigned w = 0; w < MultiVertex::numWorkers(); ++w)
        if (!call(w)) return false;
      return true;
    } else {
      return call();
    }
  }

 private:
  template <class... W> bool call(W... worker) {
    if constexpr (std::is_void_v<decltype(object_.compute(worker...))>) {
      object_.compute(worker...);
      return true;
    } else {
      return static_cast<bool>(object_.compute(worker...));
    }
  }
  T object_;
};

using Factory = std::function<std::unique_ptr<VertexInstance>()>;

inline std::map<std::string, Factory> &registry() {
  static std::map<std::string, Factory> vertices;
  return vertices;
}

template <class T> bool register_vertex(const char *name, const char *fields) {
  std::string type(name);
  std::vector<std::string> names = split_names(fields);
  registry()[type] = [type, names] { return std::unique_ptr<VertexInstance>(new VertexOf<T>(type, names)); };
  return true;
}

struct GraphState {
  Target target;
  std::vector<std::shared_ptr<Storage>> variables;
  std::vector<std::string> computeSets;
  std::vector<std::unique_ptr<VertexInstance>> vertices;
  std::map<std::string, std::pair<Tensor, bool>> streams;  // handle -> (tensor, is a host write)
  std::vector<std::string> codelets;
};

}  // namespace einc

#define EINC_POPLAR_VERTEX(Type, ...)                                                       \
  namespace einc_poplar_vertices {                                                          \
  struct Type##_ : ::Type {                                                                 \
    std::vector<std::shared_ptr<::poplar::einc::Field>> einc_fields() {                     \
      return ::poplar::einc::handles(__VA_ARGS__);                                          \
    }                                                                                       \
  };                                                                                        \
  }                                                                                         \
  static const bool einc_poplar_registered_##Type =                                         \
      ::poplar::einc::register_vertex<einc_poplar_vertices::Type##_>(#Type, #__VA_ARGS__);

class FieldRef {
 public:
  FieldRef(einc::VertexInstance *vertex, einc::Field *field, std::string path)
      : vertex_(vertex), field_(field), path_(std::move(path)) {}
  FieldRef operator[](std::size_t i) const {
    return FieldRef(vertex_, &field_->element(i), path_ + "[" + std::to_string(i) + "]");
  }
  einc::Field &einc_field() const { return *field_; }
  const std::string &einc_path() const { return path_; }

 private:
  einc::VertexInstance *vertex_;
  einc::Field *field_;
  std::string path_;
};

class VertexRef {
 public:
  VertexRef() = default;
  VertexRef(einc::VertexInstance *vertex, unsigned id) : vertex_(vertex), id_(id) {}
  FieldRef operator[](StringRef name) const {
    auto it = vertex_->fields.find(name);
    if (it == vertex_->fields.end())
      throw graph_connection_error("vertex type '" + vertex_->type + "' has no field '" + name +
                                   "' (fields are listed in EINC_POPLAR_VERTEX)");
    return FieldRef(vertex_, it->second.get(), vertex_->type + "." + name);
  }
  unsigned getId() const { return id_; }
  einc::VertexInstance *einc_vertex() const { return vertex_; }

 private:
  einc::VertexInstance *vertex_ = nullptr;
  unsigned id_ = 0;
};

class Graph {
 public:
  explicit Graph(const Target &target) : state_(std::make_shared<einc::GraphState>()) { state_->target = target; }
  explicit Graph(const Device &device) : Graph(device.getTarget()) {}

  const Target &getTarget() const { return state_->target; }

  void addCodelets(StringRef source, CodeletFileType = CodeletFileType::Auto, StringRef = "", StringRef = "") {
    state_->codelets.push_back(source);  // mirror: codelets are compiled into this program
  }

  Tensor addVariable(const Type &type, ArrayRef<std::size_t> shape, const DebugContext &debug = {}) {
    std::vector<std::size_t> s = shape.vec();
    auto storage = std::make_shared<einc::Storage>(type, debug.getPathName(), einc::product(s));
    state_->variables.push_back(storage);
    std::vector<std::size_t> elements(storage->numElements());
    for (std::size_t i = 0; i < elements.size(); ++i) elements[i] = i;
    return Tensor(storage, s, elements);
  }

  template <class T>
  Tensor addConstant(const Type &type, ArrayRef<std::size_t> shape, ArrayRef<T> values, const DebugContext &debug = {}) {
    Tensor t = addVariable(type, shape, debug);
    if (values.size() != t.numElements())
      throw poplar_error("addConstant: " + std::to_string(values.size()) + " values for a tensor of " +
                         std::to_string(t.numElements()) + " elements");
    for (std::size_t i = 0; i < values.size(); ++i) store(*t.einc_storage(), i, values[i]);
    t.einc_storage()->constant = true;
    return t;
  }

  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T> || std::is_same_v<T, half>>>
  Tensor addConstant(const Type &type, ArrayRef<std::size_t> shape, T value, const DebugContext &debug = {}) {
    Tensor t = addVariable(type, shape, debug);
    for (std::size_t i = 0; i < t.numElements(); ++i) store(*t.einc_storage(), i, value);
    t.einc_storage()->constant = true;
    return t;
  }

  ComputeSet addComputeSet(const DebugContext &debug = {}) {
    state_->computeSets.push_back(debug.getPathName());
    return ComputeSet(static_cast<unsigned>(state_->computeSets.size() - 1));
  }

  VertexRef addVertex(ComputeSet cs, StringRef vertexType) {
    if (cs.getId() >= state_->computeSets.size()) throw poplar_error("addVertex: unknown compute set");
    auto it = einc::registry().find(vertexType);
    if (it == einc::registry().end())
      throw poplar_error("unknown vertex type '" + vertexType +
                         "' (einc's Poplar mirror needs EINC_POPLAR_VERTEX(" + vertexType + ", fields...))");
    std::unique_ptr<einc::VertexInstance> vertex = it->second();
    vertex->computeSet = cs.getId();
    state_->vertices.push_back(std::move(vertex));
    return VertexRef(state_->vertices.back().get(), static_cast<unsigned>(state_->vertices.size() - 1));
  }

  VertexRef addVertex(ComputeSet cs, StringRef vertexType,
                      std::initializer_list<std::pair<const std::string, Tensor>> connections) {
    VertexRef v = addVertex(cs, vertexType);
    for (const auto &[field, tensor] : connections) connect(v[field], tensor);
    return v;
  }

  void connect(FieldRef field, const Tensor &tensor) {
    try {
      field.einc_field().connect(tensor);
    } catch (const graph_connection_error &e) {
      throw graph_connection_error(field.einc_path() + ": " + e.what());
    }
  }

  void connect(FieldRef field, const std::vector<Tensor> &tensors) {
    try {
      field.einc_field().connect_list(tensors);
    } catch (const graph_connection_error &e) {
      throw graph_connection_error(field.einc_path() + ": " + e.what());
    }
  }

  void setFieldSize(FieldRef field, std::size_t size) { field.einc_field().set_size(size); }

  template <class T> void setInitialValue(FieldRef field, T value) {
    try {
      field.einc_field().set_initial_value(static_cast<double>(value));
    } catch (const graph_connection_error &e) {
      throw graph_connection_error(field.einc_path() + ": " + e.what());
    }
  }

  void setTileMapping(VertexRef v, unsigned tile) {
    check_tile(tile);
    v.einc_vertex()->tile = static_cast<int>(tile);
  }

  void setTileMapping(const Tensor &t, unsigned tile) {
    check_tile(tile);
    for (std::size_t e : t.einc_elements()) t.einc_storage()->tiles[e] = static_cast<int>(tile);
  }

  void setPerfEstimate(VertexRef, std::uint64_t) {}

  void createHostWrite(StringRef handle, const Tensor &t, bool = false) { add_stream(handle, t, true); }
  void createHostRead(StringRef handle, const Tensor &t, bool = false) { add_stream(handle, t, false); }

  const std::shared_ptr<einc::GraphState> &einc_state() const { return state_; }

 private:
  template <class T> static void store(einc::Storage &s, std::size_t i, T value) {
    const Type &t = s.type;
    unsigned char *p = s.element(i);
    auto put = [&](auto v) { std::memcpy(p, &v, sizeof v); };
    if (t == FLOAT) put(static_cast<float>(value));
    else if (t == HALF) put(static_cast<half>(static_cast<float>(value)));
    else if (t == INT) put(static_cast<int>(value));
    else if (t == UNSIGNED_INT) put(static_cast<unsigned>(value));
    else if (t == SHORT) put(static_cast<short>(value));
    else if (t == UNSIGNED_SHORT) put(static_cast<unsigned short>(value));
    else if (t == CHAR) put(static_cast<char>(value));
    else if (t == SIGNED_CHAR) put(static_cast<signed char>(value));
    else if (t == UNSIGNED_CHAR) put(static_cast<unsigned char>(value));
    else if (t == BOOL) put(static_cast<bool>(value));
    else if (t == LONGLONG) put(static_cast<long long>(value));
    else if (t == UNSIGNED_LONGLONG) put(static_cast<unsigned long long>(value));
    else throw poplar_error("addConstant: unsupported type " + t.toString());
  }

  void check_tile(unsigned tile) const {
    if (tile >= state_->target.getNumTiles())
      throw poplar_error("tile " + std::to_string(tile) + " out of range (the target has " +
                         std::to_string(state_->target.getNumTiles()) + " tiles)");
  }

  void add_stream(const std::string &handle, const Tensor &t, bool write) {
    if (!state_->streams.emplace(handle, std::make_pair(t, write)).second)
      throw poplar_error("a host stream named '" + handle + "' exists already");
  }

  std::shared_ptr<einc::GraphState> state_;
};

}  // namespace poplar
