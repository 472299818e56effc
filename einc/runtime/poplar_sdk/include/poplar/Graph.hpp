// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
//
// The mirror has no codelet compiler: vertex classes are compiled into the same program
// as the host code, and each class must be registered, after its definition, with
//   EINC_POPLAR_VERTEX(ClassName, field1, field2, ...)
// naming the fields the graph connects or sets (public members; a non-template class at
// global scope). With Graphcore's SDK that macro is defined empty, and addCodelets()
// compiles the codelet source as usual.
//
// Registered types go to a table of the shared object the macro is compiled into (hidden:
// every kernel library loaded in a process has its own), and a Graph constructed there
// makes its vertices from that table. The Graph's methods are defined once, in the
// mirror's library (src/Graph.cpp); what is defined here is per vertex type (making a
// vertex, running compute()) or a template over the caller's values.
#pragma once

#include <array>
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

// What stays inside the shared object it is compiled into.
#define EINC_POPLAR_LOCAL __attribute__((visibility("hidden")))

namespace poplar {

enum class CodeletFileType { PreprocessedAsmSource, AsmSource, CSource, CppSource, IrSource, Object, Auto };

namespace einc {

// A member EINC_POPLAR_VERTEX lists: an edge (a Field of the codelet object, not owned), or
// a plain member, set once with Graph::setInitialValue (`set` casts the value to its type).
struct FieldHandle {
  Field *edge;
  void *plain;
  std::size_t size;
  void (*set)(void *member, double value);
};

template <class T> void set_plain(void *member, double value) { *static_cast<T *>(member) = static_cast<T>(value); }

template <class F> FieldHandle handle(F &field) {
  if constexpr (std::is_base_of_v<Field, F>) {
    return {&field, nullptr, 0, nullptr};
  } else {
    static_assert(std::is_arithmetic_v<F> || std::is_same_v<F, half>,
                  "EINC_POPLAR_VERTEX lists edges and plain arithmetic members only");
    return {nullptr, &field, sizeof(F), &set_plain<F>};
  }
}

template <class... F> std::array<FieldHandle, sizeof...(F)> handles(F &...fields) { return {{handle(fields)...}}; }

// One vertex of a graph: the codelet object and its fields by name.
class VertexInstance {
 public:
  VertexInstance();
  virtual ~VertexInstance();
  virtual bool run() = 0;  // compute(), or compute(w) for every worker of a MultiVertex
  std::string type;
  unsigned computeSet = 0;
  int tile = -1;
  std::map<std::string, std::shared_ptr<Field>> fields;

  // The vertex's type and its fields: `names` (EINC_POPLAR_VERTEX's list, comma-separated)
  // name the `count` handles in order.
  void einc_init(const char *name, const char *names, const FieldHandle *list, std::size_t count);
};

// A registered vertex type: its name, its fields' names, how to make one; the next in its
// library's table.
struct VertexType {
  const char *name;
  const char *fields;
  std::unique_ptr<VertexInstance> (*make)(const VertexType &type);
  const VertexType *next;
};

template <class T> class VertexOf final : public VertexInstance {
 public:
  explicit VertexOf(const VertexType &t) { object_.einc_fields(*this, t); }
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

template <class T> std::unique_ptr<VertexInstance> make_vertex(const VertexType &t) {
  return std::unique_ptr<VertexInstance>(new VertexOf<T>(t));
}

template <std::size_t N>
void init_vertex(VertexInstance &vertex, const VertexType &t, const std::array<FieldHandle, N> &list) {
  vertex.einc_init(t.name, t.fields, list.data(), N);
}

// This shared object's vertex types, the last registered first (it wins over an earlier one
// of the same name).
EINC_POPLAR_LOCAL inline const VertexType *vertex_types = nullptr;

EINC_POPLAR_LOCAL inline bool register_vertex(VertexType &type) {
  type.next = vertex_types;
  vertex_types = &type;
  return true;
}

struct GraphState {
  Target target;
  const VertexType *vertexTypes = nullptr;  // those of the library that made the Graph
  std::vector<std::shared_ptr<Storage>> variables;
  std::vector<std::string> computeSets;
  std::vector<std::unique_ptr<VertexInstance>> vertices;
  std::map<std::string, std::pair<Tensor, bool>> streams;  // handle -> (tensor, is a host write)
  std::vector<std::string> codelets;
};

}  // namespace einc

#define EINC_POPLAR_VERTEX(Type, ...)                                                                          \
  namespace einc_poplar_vertices {                                                                             \
  struct Type##_ : ::Type {                                                                                    \
    void einc_fields(::poplar::einc::VertexInstance &einc_poplar_vertex,                                       \
                     const ::poplar::einc::VertexType &einc_poplar_type) {                                     \
      ::poplar::einc::init_vertex(einc_poplar_vertex, einc_poplar_type, ::poplar::einc::handles(__VA_ARGS__)); \
    }                                                                                                          \
  };                                                                                                           \
  }                                                                                                            \
  static ::poplar::einc::VertexType einc_poplar_type_##Type{                                                   \
      #Type, #__VA_ARGS__, &::poplar::einc::make_vertex<einc_poplar_vertices::Type##_>, nullptr};              \
  static const bool einc_poplar_registered_##Type = ::poplar::einc::register_vertex(einc_poplar_type_##Type);

class FieldRef {
 public:
  FieldRef(einc::VertexInstance *vertex, einc::Field *field, std::string path)
      : vertex_(vertex), field_(field), path_(std::move(path)) {}
  FieldRef operator[](std::size_t i) const;
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
  FieldRef operator[](StringRef name) const;
  unsigned getId() const { return id_; }
  einc::VertexInstance *einc_vertex() const { return vertex_; }

 private:
  einc::VertexInstance *vertex_ = nullptr;
  unsigned id_ = 0;
};

class Graph {
 public:
  // The graph makes the vertex types registered in the shared object that constructs it.
  EINC_POPLAR_LOCAL explicit Graph(const Target &target) : Graph(target, einc::vertex_types) {}
  EINC_POPLAR_LOCAL explicit Graph(const Device &device) : Graph(device.getTarget()) {}
  Graph(const Target &target, const einc::VertexType *vertexTypes);
  ~Graph();

  const Target &getTarget() const { return state_->target; }

  void addCodelets(StringRef source, CodeletFileType = CodeletFileType::Auto, StringRef = "", StringRef = "");

  Tensor addVariable(const Type &type, ArrayRef<std::size_t> shape, const DebugContext &debug = {});

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

  ComputeSet addComputeSet(const DebugContext &debug = {});

  VertexRef addVertex(ComputeSet cs, StringRef vertexType);
  VertexRef addVertex(ComputeSet cs, StringRef vertexType,
                      std::initializer_list<std::pair<const std::string, Tensor>> connections);

  void connect(FieldRef field, const Tensor &tensor);
  void connect(FieldRef field, const std::vector<Tensor> &tensors);
  void setFieldSize(FieldRef field, std::size_t size);

  template <class T> void setInitialValue(FieldRef field, T value) {
    set_initial_value(field, static_cast<double>(value));
  }

  void setTileMapping(VertexRef v, unsigned tile);
  void setTileMapping(const Tensor &t, unsigned tile);
  void setPerfEstimate(VertexRef, std::uint64_t) {}

  void createHostWrite(StringRef handle, const Tensor &t, bool = false);
  void createHostRead(StringRef handle, const Tensor &t, bool = false);

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

  void set_initial_value(FieldRef field, double value);
  void check_tile(unsigned tile) const;
  void add_stream(const std::string &handle, const Tensor &t, bool write);

  std::shared_ptr<einc::GraphState> state_;
};

namespace einc {

// The graph as the mirror recorded it, without running it: one line per vertex, `compute
// set \t vertex type \t tile`, then per field `\t name=tensor:first:last:count:r|w` (the
// elements it touches: `count` reads, or writes when it only writes; `w` if it writes), or
// `\t name=` for a plain field (einc/runtime/poplar.py's VertexRecord reads it).
std::string describe(const Graph &graph);

}  // namespace einc

}  // namespace poplar
