// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
//
// Codelets: classes deriving from Vertex (one worker) or MultiVertex (compute(workerId)
// called for each of the tile's worker contexts) with public fields:
//   Input<T>, Output<T>, InOut<T>            a scalar edge (a one-element tensor)
//   Input<Vector<T>>, Output<..>, InOut<..>  a 1-D edge (any tensor, taken flattened)
//   Vector<Input<Vector<T>>> (and so on)      a list of edges (a 2-D tensor's rows, or a
//                                             list of tensors)
//   plain members (unsigned n; float alpha;)  set with Graph::setInitialValue
// Vector's layout and alignment template arguments are accepted and ignored.
//
// Before compute() the mirror copies each edge's elements into the field (contiguous,
// like the tile memory the IPU's exchange fills); after it, Output and InOut fields are
// copied back and the copy is freed. A 1-D field's indexing is bounds-checked (poplar_error): a vertex connected to
// a slice of a tensor cannot read or write past it. Field::bytes() is what the field's data
// take in tile memory (Engine checks each tile's total against Target::getBytesPerTile()).
//
// What a codelet's compute() runs (field access, indexing and its check) is defined here;
// the rest (connecting, copying, the checks' messages) once, in the mirror's library
// (src/Vertex.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

#include <poplar/Tensor.hpp>
#include <poplar/Type.hpp>
#include <poplar/exceptions.hpp>

namespace poplar {

// Codelets commonly define `static constexpr auto ONE_PTR = poplar::VectorLayout::ONE_PTR;`
// themselves, so the enumerators are not repeated in namespace poplar.
enum class VectorLayout { ONE_PTR, SPAN, SCALED_PTR32, SCALED_PTR64, SCALED_PTR128, COMPACT_PTR };

enum class VectorListLayout { ONE_PTR, SCALED_PTR32, SCALED_PTR64, DELTAN, DELTANELEMENTS };

class Vertex {
 public:
  Vertex() = default;
};

// Older API name: same as Vertex in the mirror.
class SupervisorVertex : public Vertex {};

class MultiVertex {
 public:
  MultiVertex() = default;
  // Worker contexts per tile (six on Mk1/Mk2 IPUs).
  static constexpr unsigned numWorkers() { return 6; }
};

namespace einc {

// One element a vertex field touches: (variable, element index).
struct Access {
  const Storage *storage;
  std::size_t element;
  bool writes;
};

// A vertex field as the graph sees it. The defaults: not a list of edges, not a plain value,
// nothing to copy, no elements, no bytes.
class Field {
 public:
  virtual ~Field();
  virtual void connect(const Tensor &t) = 0;
  virtual void connect_list(const std::vector<Tensor> &);
  virtual Field &element(std::size_t);
  virtual void set_size(std::size_t);
  virtual void set_initial_value(double);
  virtual bool ready() const = 0;
  virtual void gather();
  virtual void scatter();
  virtual void accesses(std::vector<Access> &) const;
  // Bytes of tile memory the field's data take (edges: their connected elements, in
  // kTileAlignment units; plain fields: their size).
  virtual std::size_t bytes() const;
};

// A field's data start on an 8-byte boundary of tile memory (einc counts the same).
inline constexpr std::size_t kTileAlignment = 8;
inline std::size_t aligned_bytes(std::size_t n) { return (n + kTileAlignment - 1) / kTileAlignment * kTileAlignment; }

enum class Direction { In, Out, InOut };

// The connected tensor of an edge and copying its elements in and out.
class Edge {
 public:
  void bind(const Tensor &t, const Type &want, std::size_t count_or_zero);
  bool bound() const { return tensor_.valid(); }
  std::size_t size() const { return tensor_.numElements(); }
  std::size_t bytes() const;
  void read(void *dst) const;
  void write(const void *src) const;
  void accesses(std::vector<Access> &out, Direction d) const;

 private:
  Tensor tensor_;
};

// A 1-D field indexed at `i` of its `size` elements (poplar_error).
[[noreturn]] void index_error(std::size_t i, std::size_t size);

// A scalar edge.
template <class T, Direction D> class ScalarField : public Field {
  static_assert(std::is_arithmetic_v<T> || std::is_same_v<T, half>, "edge of an unsupported type");

 public:
  void connect(const Tensor &t) override { edge_.bind(t, equivalent_device_type<T>::value(), 1); }
  bool ready() const override { return edge_.bound(); }
  void gather() override { edge_.read(&value_); }
  void scatter() override {
    if (D != Direction::In) edge_.write(&value_);
  }
  void accesses(std::vector<Access> &out) const override { edge_.accesses(out, D); }
  std::size_t bytes() const override { return edge_.bytes(); }

 protected:
  Edge edge_;
  T value_{};
};

// A 1-D edge.
template <class T, Direction D> class VectorField : public Field {
 public:
  void connect(const Tensor &t) override { edge_.bind(t, equivalent_device_type<T>::value(), 0); }
  bool ready() const override { return edge_.bound(); }
  // The field's data exist while its vertex runs (the tile memory the exchange fills).
  void gather() override {
    data_.reset(new T[edge_.size() ? edge_.size() : 1]);
    edge_.read(data_.get());
  }
  void scatter() override {
    if (D != Direction::In) edge_.write(data_.get());
    data_.reset();
  }
  void accesses(std::vector<Access> &out) const override { edge_.accesses(out, D); }
  std::size_t bytes() const override { return edge_.bytes(); }
  std::size_t size() const { return edge_.size(); }

 protected:
  // Indexing is checked: on the IPU an index past the connected elements reads or writes
  // whatever lies beside them in tile memory.
  // It and the operator[]s are always inlined: at -O1 GCC's inliner budget otherwise runs
  // out in a large compute() (a register tile's unswitched versions of K) and the hot
  // loop's every access becomes a call through the PLT, which the harness then times.
  __attribute__((always_inline)) std::size_t checked(std::size_t i) const {
    if (i >= edge_.size()) index_error(i, edge_.size());
    return i;
  }
  Edge edge_;
  std::unique_ptr<T[]> data_;
};

}  // namespace einc

template <class T, VectorLayout L = VectorLayout::SPAN, unsigned Align = alignof(T), bool Interleaved = false>
class Vector;

template <class T, VectorListLayout L = VectorListLayout::DELTAN, unsigned Align = alignof(T),
          bool Interleaved = false>
class VectorList;

// --- scalar edges ---

template <class T> class Input : public einc::ScalarField<T, einc::Direction::In> {
 public:
  operator T() const { return this->value_; }
  const T &operator*() const { return this->value_; }
};

template <class T> class Output : public einc::ScalarField<T, einc::Direction::Out> {
 public:
  operator T() const { return this->value_; }
  T &operator*() { return this->value_; }
  Output &operator=(const T &v) {
    this->value_ = v;
    return *this;
  }
};

template <class T> class InOut : public einc::ScalarField<T, einc::Direction::InOut> {
 public:
  operator T() const { return this->value_; }
  T &operator*() { return this->value_; }
  InOut &operator=(const T &v) {
    this->value_ = v;
    return *this;
  }
};

// --- 1-D edges ---

template <class T, VectorLayout L, unsigned A, bool I>
class Input<Vector<T, L, A, I>> : public einc::VectorField<T, einc::Direction::In> {
 public:
  __attribute__((always_inline)) const T &operator[](std::size_t i) const { return this->data_[this->checked(i)]; }
  const T *begin() const { return this->data_.get(); }
  const T *end() const { return this->data_.get() + this->size(); }
  const T *data() const { return this->data_.get(); }
};

template <class T, VectorLayout L, unsigned A, bool I>
class Output<Vector<T, L, A, I>> : public einc::VectorField<T, einc::Direction::Out> {
 public:
  __attribute__((always_inline)) T &operator[](std::size_t i) { return this->data_[this->checked(i)]; }
  __attribute__((always_inline)) const T &operator[](std::size_t i) const { return this->data_[this->checked(i)]; }
  T *begin() { return this->data_.get(); }
  T *end() { return this->data_.get() + this->size(); }
  T *data() { return this->data_.get(); }
};

template <class T, VectorLayout L, unsigned A, bool I>
class InOut<Vector<T, L, A, I>> : public einc::VectorField<T, einc::Direction::InOut> {
 public:
  __attribute__((always_inline)) T &operator[](std::size_t i) { return this->data_[this->checked(i)]; }
  __attribute__((always_inline)) const T &operator[](std::size_t i) const { return this->data_[this->checked(i)]; }
  T *begin() { return this->data_.get(); }
  T *end() { return this->data_.get() + this->size(); }
  T *data() { return this->data_.get(); }
};

// --- lists of edges: Vector<Input<Vector<float>>> and the like ---

namespace einc {

// The edges of a list, whatever their type (src/Vertex.cpp): connect() makes one edge per row
// (index of dimension 0).
class Edges : public Field {
 public:
  ~Edges() override;
  std::size_t size() const { return items_.size(); }
  void connect(const Tensor &t) override;
  void connect_list(const std::vector<Tensor> &ts) override;
  Field &element(std::size_t i) override;
  void set_size(std::size_t n) override;
  bool ready() const override;
  void gather() override;
  void scatter() override;
  void accesses(std::vector<Access> &out) const override;
  std::size_t bytes() const override;

 protected:
  virtual std::unique_ptr<Field> make_item() const = 0;
  std::vector<std::unique_ptr<Field>> items_;
};

template <class T> class EdgeList : public Edges {
 public:
  T &operator[](std::size_t i) { return static_cast<T &>(*items_[i]); }
  const T &operator[](std::size_t i) const { return static_cast<const T &>(*items_[i]); }

 protected:
  std::unique_ptr<Field> make_item() const override { return std::make_unique<T>(); }
};

// What Vector<float> is when it only names a data vector inside Input<...>.
struct DataVectorTag {};

}  // namespace einc

// A list of edges when T is an edge type; otherwise only a tag for Input<Vector<T>>.
template <class T, VectorLayout L, unsigned A, bool I>
class Vector : public std::conditional_t<std::is_base_of_v<einc::Field, T>, einc::EdgeList<T>, einc::DataVectorTag> {};

}  // namespace poplar
