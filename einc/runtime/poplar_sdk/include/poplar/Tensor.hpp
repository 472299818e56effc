// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
//
// A Tensor is a view: the variable it belongs to and, for each of its elements in
// row-major order, the element's index in that variable (a list shared between views).
// Views that keep the order (flatten, reshape, expand, squeeze) share the list; the others
// (slice, index, dimShuffle, ...) compute a new one, so views of views compose.
// The views are defined in the mirror's library (src/Tensor.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <poplar/ArrayRef.hpp>
#include <poplar/Type.hpp>
#include <poplar/exceptions.hpp>

namespace poplar {

namespace einc {

// The memory of one variable or constant, and the tile each element is mapped to.
struct Storage {
  Type type;
  std::string name;
  std::vector<unsigned char> bytes;
  std::vector<int> tiles;  // -1: not mapped yet
  bool constant = false;

  Storage(Type t, std::string n, std::size_t count);
  std::size_t numElements() const { return tiles.size(); }
  unsigned char *element(std::size_t i) { return bytes.data() + i * type.einc_size(); }
};

std::size_t product(const std::vector<std::size_t> &shape);
std::string shape_string(const std::vector<std::size_t> &shape);

}  // namespace einc

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<einc::Storage> storage, std::vector<std::size_t> shape,
         std::vector<std::size_t> elements);
  Tensor(std::shared_ptr<einc::Storage> storage, std::vector<std::size_t> shape,
         std::shared_ptr<const std::vector<std::size_t>> elements);
  Tensor(const Tensor &other);
  Tensor(Tensor &&other) noexcept;
  Tensor &operator=(const Tensor &other);
  Tensor &operator=(Tensor &&other) noexcept;
  ~Tensor();

  bool valid() const { return storage_ != nullptr; }
  std::size_t numElements() const { return elements_ ? elements_->size() : 0; }
  const std::vector<std::size_t> &shape() const { return shape_; }
  unsigned rank() const { return static_cast<unsigned>(shape_.size()); }
  std::size_t dim(unsigned i) const;
  Type elementType() const;
  std::string shapeToString() const;

  Tensor slice(std::size_t begin, std::size_t end, unsigned dimension = 0) const;
  // A box: its elements are gathered in one pass (not one dimension after another, which
  // would copy the whole tensor's list for each leading full dimension).
  Tensor slice(ArrayRef<std::size_t> begin, ArrayRef<std::size_t> end) const;
  // Index dimension 0, dropping it.
  Tensor operator[](std::size_t i) const;
  Tensor index(ArrayRef<std::size_t> indices) const;
  Tensor flatten() const;
  Tensor flatten(unsigned dimBegin, unsigned dimEnd) const;
  Tensor reshape(ArrayRef<std::size_t> shape) const;
  Tensor dimShuffle(ArrayRef<unsigned> permutation) const;
  Tensor transpose() const;
  Tensor reverse(unsigned dimension) const;
  Tensor subSample(unsigned stride, unsigned dimension) const;
  // Repeat the tensor N times along `dimension`.
  Tensor broadcast(unsigned N, unsigned dimension) const;
  // Insert singleton dimensions before the given positions.
  Tensor expand(ArrayRef<std::size_t> indices) const;
  Tensor squeeze(ArrayRef<std::size_t> dims) const;

  // mirror-only
  const std::shared_ptr<einc::Storage> &einc_storage() const { return storage_; }
  const std::vector<std::size_t> &einc_elements() const { return *elements_; }

 private:
  void check_dim(unsigned d, const char *what) const;

  std::shared_ptr<einc::Storage> storage_;
  std::vector<std::size_t> shape_;
  std::shared_ptr<const std::vector<std::size_t>> elements_;
};

// Join tensors along `dimension`. The mirror needs them to share one variable.
Tensor concat(ArrayRef<Tensor> tensors, unsigned dimension = 0);
Tensor concat(const Tensor &a, const Tensor &b, unsigned dimension = 0);

}  // namespace poplar
