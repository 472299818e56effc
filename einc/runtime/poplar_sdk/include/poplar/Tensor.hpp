// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
//
// A Tensor is a view: the variable it belongs to and, for each of its elements in
// row-major order, the element's index in that variable (a list shared between views).
// Views that keep the order (flatten, reshape, expand, squeeze) share the list; the others
// (slice, index, dimShuffle, ...) compute a new one, so views of views compose.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <numeric>
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

  Storage(Type t, std::string n, std::size_t count)
      : type(t), name(std::move(n)), bytes(count * t.einc_size()), tiles(count, -1) {}
  std::size_t numElements() const { return tiles.size(); }
  unsigned char *element(std::size_t i) { return bytes.data() + i * type.einc_size(); }
};

inline std::size_t product(const std::vector<std::size_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
}

inline std::string shape_string(const std::vector<std::size_t> &shape) {
  std::string s = "{";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "}";
}

}  // namespace einc

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<einc::Storage> storage, std::vector<std::size_t> shape,
         std::vector<std::size_t> elements)
      : storage_(std::move(storage)),
        shape_(std::move(shape)),
        elements_(std::make_shared<const std::vector<std::size_t>>(std::move(elements))) {}
  Tensor(std::shared_ptr<einc::Storage> storage, std::vector<std::size_t> shape,
         std::shared_ptr<const std::vector<std::size_t>> elements)
      : storage_(std::move(storage)), shape_(std::move(shape)), elements_(std::move(elements)) {}

  bool valid() const { return storage_ != nullptr; }
  std::size_t numElements() const { return elements_ ? elements_->size() : 0; }
  const std::vector<std::size_t> &shape() const { return shape_; }
  unsigned rank() const { return static_cast<unsigned>(shape_.size()); }
  std::size_t dim(unsigned i) const {
    check_dim(i, "dim");
    return shape_[i];
  }
  Type elementType() const { return storage_ ? storage_->type : Type(); }
  std::string shapeToString() const { return einc::shape_string(shape_); }

  Tensor slice(std::size_t begin, std::size_t end, unsigned dimension = 0) const {
    check_dim(dimension, "slice");
    if (begin > end || end > shape_[dimension])
      throw poplar_error("slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                         ") out of range for dimension " + std::to_string(dimension) +
                         " of a tensor of shape " + shapeToString());
    std::vector<std::size_t> shape = shape_;
    shape[dimension] = end - begin;
    if (dimension == 0) {  // a contiguous run of the element list
      std::size_t inner = shape_[0] ? numElements() / shape_[0] : 0;
      auto first = elements_->begin() + static_cast<std::ptrdiff_t>(begin * inner);
      return Tensor(storage_, shape, std::vector<std::size_t>(first, first + static_cast<std::ptrdiff_t>((end - begin) * inner)));
    }
    return remap(shape, [&](std::vector<std::size_t> &index) { index[dimension] += begin; });
  }

  // A box: its elements are gathered in one pass (not one dimension after another, which
  // would copy the whole tensor's list for each leading full dimension).
  Tensor slice(ArrayRef<std::size_t> begin, ArrayRef<std::size_t> end) const {
    if (begin.size() != rank() || end.size() != rank())
      throw poplar_error("slice bounds need one entry per dimension of " + shapeToString());
    std::vector<std::size_t> shape(rank());
    for (unsigned d = 0; d < rank(); ++d) {
      if (begin[d] > end[d] || end[d] > shape_[d])
        throw poplar_error("slice [" + std::to_string(begin[d]) + ", " + std::to_string(end[d]) +
                           ") out of range for dimension " + std::to_string(d) + " of a tensor of shape " +
                           shapeToString());
      shape[d] = end[d] - begin[d];
    }
    std::size_t n = einc::product(shape);
    std::vector<std::size_t> elements;
    elements.reserve(n);
    if (n != 0 && rank() != 0) {
      std::size_t last = rank() - 1, row = shape[last];
      std::vector<std::size_t> index(rank(), 0);  // over the box's rows (the last dimension's runs)
      for (std::size_t k = 0; k < n / row; ++k) {
        std::size_t flat = 0;
        for (unsigned d = 0; d < rank(); ++d) flat = flat * shape_[d] + begin[d] + (d == last ? 0 : index[d]);
        elements.insert(elements.end(), elements_->begin() + static_cast<std::ptrdiff_t>(flat),
                        elements_->begin() + static_cast<std::ptrdiff_t>(flat + row));
        for (std::size_t d = last; d-- > 0;) {
          if (++index[d] < shape[d]) break;
          index[d] = 0;
        }
      }
    } else if (n != 0) {
      elements = *elements_;
    }
    return Tensor(storage_, shape, std::move(elements));
  }

  // Index dimension 0, dropping it.
  Tensor operator[](std::size_t i) const {
    if (rank() == 0) throw poplar_error("cannot index a scalar tensor");
    Tensor t = slice(i, i + 1, 0);
    t.shape_.erase(t.shape_.begin());
    return t;
  }

  Tensor index(ArrayRef<std::size_t> indices) const {
    Tensor t = *this;
    for (std::size_t i : indices) t = t[i];
    return t;
  }

  Tensor flatten() const { return Tensor(storage_, {numElements()}, elements_); }

  Tensor flatten(unsigned dimBegin, unsigned dimEnd) const {
    if (dimBegin >= dimEnd || dimEnd > rank()) throw poplar_error("flatten: bad dimension range");
    std::vector<std::size_t> shape(shape_.begin(), shape_.begin() + dimBegin);
    std::size_t n = 1;
    for (unsigned d = dimBegin; d < dimEnd; ++d) n *= shape_[d];
    shape.push_back(n);
    shape.insert(shape.end(), shape_.begin() + dimEnd, shape_.end());
    return Tensor(storage_, shape, elements_);
  }

  Tensor reshape(ArrayRef<std::size_t> shape) const {
    std::vector<std::size_t> s = shape.vec();
    if (einc::product(s) != numElements())
      throw poplar_error("cannot reshape " + shapeToString() + " to " + einc::shape_string(s));
    return Tensor(storage_, s, elements_);
  }

  Tensor dimShuffle(ArrayRef<unsigned> permutation) const {
    if (permutation.size() != rank()) throw poplar_error("dimShuffle: permutation of the wrong rank");
    std::vector<std::size_t> shape(rank());
    for (unsigned d = 0; d < rank(); ++d) {
      check_dim(permutation[d], "dimShuffle");
      shape[d] = shape_[permutation[d]];
    }
    std::vector<unsigned> perm = permutation.vec();
    std::vector<std::size_t> scratch(perm.size());
    return remap(shape, [&](std::vector<std::size_t> &index) {
      for (std::size_t d = 0; d < perm.size(); ++d) scratch[perm[d]] = index[d];
      index = scratch;  // same size: no allocation
    });
  }

  Tensor transpose() const {
    if (rank() != 2) throw poplar_error("transpose needs a rank-2 tensor, got " + shapeToString());
    return dimShuffle({1, 0});
  }

  Tensor reverse(unsigned dimension) const {
    check_dim(dimension, "reverse");
    std::size_t n = shape_[dimension];
    return remap(shape_, [&](std::vector<std::size_t> &index) { index[dimension] = n - 1 - index[dimension]; });
  }

  Tensor subSample(unsigned stride, unsigned dimension) const {
    check_dim(dimension, "subSample");
    std::vector<std::size_t> shape = shape_;
    shape[dimension] = (shape_[dimension] + stride - 1) / stride;
    return remap(shape, [&](std::vector<std::size_t> &index) { index[dimension] *= stride; });
  }

  // Repeat the tensor N times along `dimension`.
  Tensor broadcast(unsigned N, unsigned dimension) const {
    check_dim(dimension, "broadcast");
    std::vector<std::size_t> shape = shape_;
    std::size_t n = shape_[dimension];
    shape[dimension] *= N;
    return remap(shape, [&](std::vector<std::size_t> &index) { index[dimension] %= n; });
  }

  // Insert singleton dimensions before the given positions.
  Tensor expand(ArrayRef<std::size_t> indices) const {
    std::vector<std::size_t> shape = shape_;
    for (std::size_t k = indices.size(); k-- > 0;) shape.insert(shape.begin() + indices[k], 1);
    return Tensor(storage_, shape, elements_);
  }

  Tensor squeeze(ArrayRef<std::size_t> dims) const {
    std::vector<std::size_t> shape;
    for (std::size_t d = 0; d < shape_.size(); ++d) {
      bool drop = false;
      for (std::size_t k : dims) drop = drop || k == d;
      if (drop && shape_[d] != 1) throw poplar_error("squeeze: dimension is not 1");
      if (!drop) shape.push_back(shape_[d]);
    }
    return Tensor(storage_, shape, elements_);
  }

  // mirror-only
  const std::shared_ptr<einc::Storage> &einc_storage() const { return storage_; }
  const std::vector<std::size_t> &einc_elements() const { return *elements_; }

 private:
  void check_dim(unsigned d, const char *what) const {
    if (d >= rank())
      throw poplar_error(std::string(what) + ": dimension " + std::to_string(d) + " out of range for " +
                         shapeToString());
  }

  // A view of shape `shape` whose element at index i is this tensor's element at f(i).
  template <class F> Tensor remap(const std::vector<std::size_t> &shape, F f) const {
    std::size_t n = einc::product(shape);
    std::vector<std::size_t> elements(n);
    std::vector<std::size_t> index(shape.size(), 0), old(shape.size());
    for (std::size_t k = 0; k < n; ++k) {
      old = index;  // same size: no allocation
      f(old);
      std::size_t flat = 0;
      for (std::size_t d = 0; d < shape_.size(); ++d) flat = flat * shape_[d] + old[d];
      elements[k] = (*elements_)[flat];
      for (std::size_t d = shape.size(); d-- > 0;) {
        if (++index[d] < shape[d]) break;
        index[d] = 0;
      }
    }
    return Tensor(storage_, shape, elements);
  }

  std::shared_ptr<einc::Storage> storage_;
  std::vector<std::size_t> shape_;
  std::shared_ptr<const std::vector<std::size_t>> elements_;
};

// Join tensors along `dimension`. The mirror needs them to share one variable.
inline Tensor concat(ArrayRef<Tensor> tensors, unsigned dimension = 0) {
  if (tensors.empty()) throw poplar_error("concat of no tensors");
  const Tensor &first = tensors[0];
  for (const Tensor &t : tensors) {
    if (t.einc_storage() != first.einc_storage())
      throw poplar_error("einc's Poplar mirror concatenates only views of one variable");
    if (t.rank() != first.rank()) throw poplar_error("concat: tensors of different rank");
  }
  if (dimension >= first.rank()) throw poplar_error("concat: dimension out of range");
  // Move `dimension` to the front, append, move it back.
  std::vector<unsigned> to_front(first.rank());
  std::iota(to_front.begin(), to_front.end(), 0u);
  to_front.erase(to_front.begin() + dimension);
  to_front.insert(to_front.begin(), dimension);
  std::vector<std::size_t> elements;
  std::vector<std::size_t> shape = first.dimShuffle(to_front).shape();
  shape[0] = 0;
  for (const Tensor &t : tensors) {
    Tensor moved = t.dimShuffle(to_front);
    for (std::size_t d = 1; d < shape.size(); ++d)
      if (moved.shape()[d] != shape[d]) throw poplar_error("concat: shapes differ off the joined dimension");
    shape[0] += moved.shape()[0];
    elements.insert(elements.end(), moved.einc_elements().begin(), moved.einc_elements().end());
  }
  std::vector<unsigned> back(first.rank());
  for (unsigned d = 0; d < first.rank(); ++d) back[to_front[d]] = d;
  return Tensor(first.einc_storage(), shape, elements).dimShuffle(back);
}

inline Tensor concat(const Tensor &a, const Tensor &b, unsigned dimension = 0) {
  return concat({a, b}, dimension);
}

}  // namespace poplar
