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
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
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

// A vertex field as the graph sees it.
class Field {
 public:
  virtual ~Field() = default;
  virtual void connect(const Tensor &t) = 0;
  virtual void connect_list(const std::vector<Tensor> &) { throw graph_connection_error("field is not a list of edges"); }
  virtual Field &element(std::size_t) { throw graph_connection_error("field is not a list of edges"); }
  virtual void set_size(std::size_t) { throw graph_connection_error("field is not a list of edges"); }
  virtual void set_initial_value(double) { throw graph_connection_error("field is an edge, not a plain value"); }
  virtual bool ready() const = 0;
  virtual void gather() {}
  virtual void scatter() {}
  virtual void accesses(std::vector<Access> &) const {}
  // Bytes of tile memory the field's data take (edges: their connected elements, in
  // kTileAlignment units; plain fields: their size).
  virtual std::size_t bytes() const { return 0; }
};

// A field's data start on an 8-byte boundary of tile memory (einc counts the same).
inline constexpr std::size_t kTileAlignment = 8;
inline std::size_t aligned_bytes(std::size_t n) { return (n + kTileAlignment - 1) / kTileAlignment * kTileAlignment; }

enum class Direction { In, Out, InOut };

// The connected tensor of an edge and copying its elements in and out.
class Edge {
 public:
  void bind(const Tensor &t, const Type &want, std::size_t count_or_zero) {
    if (!t.valid()) throw graph_connection_error("connecting an invalid tensor");
    if (t.elementType() != want)
      throw graph_connection_error("a " + want.toString() + " field connected to a " +
                                   t.elementType().toString() + " tensor");
    if (count_or_zero != 0 && t.numElements() != count_or_zero)
      throw graph_connection_error("a scalar field connected to a tensor of " +
                                   std::to_string(t.numElements()) + " elements");
    tensor_ = t;
  }
  bool bound() const { return tensor_.valid(); }
  std::size_t size() const { return tensor_.numElements(); }
  std::size_t bytes() const { return bound() ? aligned_bytes(size() * tensor_.elementType().einc_size()) : 0; }
  void read(void *dst) const {
    auto &s = *tensor_.einc_storage();
    std::size_t w = s.type.einc_size();
    auto *out = static_cast<unsigned char *>(dst);
    for (std::size_t i = 0; i < tensor_.numElements(); ++i)
      std::memcpy(out + i * w, s.element(tensor_.einc_elements()[i]), w);
  }
  void write(const void *src) const {
    auto &s = *tensor_.einc_storage();
    if (s.constant) throw poplar_error("a vertex writes to constant '" + s.name + "'");
    std::size_t w = s.type.einc_size();
    auto *in = static_cast<const unsigned char *>(src);
    for (std::size_t i = 0; i < tensor_.numElements(); ++i)
      std::memcpy(s.element(tensor_.einc_elements()[i]), in + i * w, w);
  }
  void accesses(std::vector<Access> &out, Direction d) const {
    for (std::size_t e : tensor_.einc_elements()) {
      if (d != Direction::Out) out.push_back({tensor_.einc_storage().get(), e, false});
      if (d != Direction::In) out.push_back({tensor_.einc_storage().get(), e, true});
    }
  }

 private:
  Tensor tensor_;
};

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
  std::size_t checked(std::size_t i) const {
    if (i >= edge_.size())
      throw poplar_error("a vertex indexes element " + std::to_string(static_cast<long long>(i)) +
                         " of a field connected to " + std::to_string(edge_.size()) + " elements");
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
  const T &operator[](std::size_t i) const { return this->data_[this->checked(i)]; }
  const T *begin() const { return this->data_.get(); }
  const T *end() const { return this->data_.get() + this->size(); }
  const T *data() const { return this->data_.get(); }
};

template <class T, VectorLayout L, unsigned A, bool I>
class Output<Vector<T, L, A, I>> : public einc::VectorField<T, einc::Direction::Out> {
 public:
  T &operator[](std::size_t i) { return this->data_[this->checked(i)]; }
  const T &operator[](std::size_t i) const { return this->data_[this->checked(i)]; }
  T *begin() { return this->data_.get(); }
  T *end() { return this->data_.get() + this->size(); }
  T *data() { return this->data_.get(); }
};

template <class T, VectorLayout L, unsigned A, bool I>
class InOut<Vector<T, L, A, I>> : public einc::VectorField<T, einc::Direction::InOut> {
 public:
  T &operator[](std::size_t i) { return this->data_[this->checked(i)]; }
  const T &operator[](std::size_t i) const { return this->data_[this->checked(i)]; }
  T *begin() { return this->data_.get(); }
  T *end() { return this->data_.get() + this->size(); }
  T *data() { return this->data_.get(); }
};

// --- lists of edges: Vector<Input<Vector<float>>> and the like ---

namespace einc {

template <class T> class EdgeList : public Field {
 public:
  std::size_t size() const { return items_.size(); }
  T &operator[](std::size_t i) { return *items_[i]; }
  const T &operator[](std::size_t i) const { return *items_[i]; }

  void connect(const Tensor &t) override {  // one edge per row (index of dimension 0)
    if (t.rank() < 1) throw graph_connection_error("a list of edges needs a tensor of rank >= 1");
    set_size(t.dim(0));
    for (std::size_t i = 0; i < items_.size(); ++i) items_[i]->connect(t[i]);
  }
  void connect_list(const std::vector<Tensor> &ts) override {
    set_size(ts.size());
    for (std::size_t i = 0; i < ts.size(); ++i) items_[i]->connect(ts[i]);
  }
  Field &element(std::size_t i) override {
    if (i >= items_.size())
      throw graph_connection_error("edge " + std::to_string(i) + " of a list of " +
                                   std::to_string(items_.size()) + " (call setFieldSize first)");
    return *items_[i];
  }
  void set_size(std::size_t n) override {
    items_.clear();
    for (std::size_t i = 0; i < n; ++i) items_.push_back(std::make_unique<T>());
  }
  bool ready() const override {
    for (auto &item : items_)
      if (!item->ready()) return false;
    return true;
  }
  void gather() override {
    for (auto &item : items_) item->gather();
  }
  void scatter() override {
    for (auto &item : items_) item->scatter();
  }
  void accesses(std::vector<Access> &out) const override {
    for (auto &item : items_) item->accesses(out);
  }
  std::size_t bytes() const override {
    std::size_t n = 0;
    for (auto &item : items_) n += item->bytes();
    return n;
  }

 private:
  std::vector<std::unique_ptr<T>> items_;
};

// What Vector<float> is when it only names a data vector inside Input<...>.
struct DataVectorTag {};

}  // namespace einc

// A list of edges when T is an edge type; otherwise only a tag for Input<Vector<T>>.
template <class T, VectorLayout L, unsigned A, bool I>
class Vector : public std::conditional_t<std::is_base_of_v<einc::Field, T>, einc::EdgeList<T>, einc::DataVectorTag> {};

}  // namespace poplar
