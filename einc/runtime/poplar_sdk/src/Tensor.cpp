// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
// Tensor views (include/poplar/Tensor.hpp), compiled once into the mirror's library.
#include <functional>
#include <numeric>

#include <poplar/Tensor.hpp>

namespace poplar {

namespace einc {

Storage::Storage(Type t, std::string n, std::size_t count)
    : type(t), name(std::move(n)), bytes(count * t.einc_size()), tiles(count, -1) {}

std::size_t product(const std::vector<std::size_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
}

std::string shape_string(const std::vector<std::size_t> &shape) {
  std::string s = "{";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "}";
}

}  // namespace einc

namespace {

// A view of `t` of shape `shape` whose element at index i is t's element at f(i).
template <class F> Tensor remap(const Tensor &t, const std::vector<std::size_t> &shape, F f) {
  const std::vector<std::size_t> &from = t.shape();
  const std::vector<std::size_t> &list = t.einc_elements();
  std::size_t n = einc::product(shape);
  std::vector<std::size_t> elements(n);
  std::vector<std::size_t> index(shape.size(), 0), old(shape.size());
  for (std::size_t k = 0; k < n; ++k) {
    old = index;  // same size: no allocation
    f(old);
    std::size_t flat = 0;
    for (std::size_t d = 0; d < from.size(); ++d) flat = flat * from[d] + old[d];
    elements[k] = list[flat];
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return Tensor(t.einc_storage(), shape, elements);
}

}  // namespace

Tensor::Tensor(std::shared_ptr<einc::Storage> storage, std::vector<std::size_t> shape,
               std::vector<std::size_t> elements)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      elements_(std::make_shared<const std::vector<std::size_t>>(std::move(elements))) {}

Tensor::Tensor(std::shared_ptr<einc::Storage> storage, std::vector<std::size_t> shape,
               std::shared_ptr<const std::vector<std::size_t>> elements)
    : storage_(std::move(storage)), shape_(std::move(shape)), elements_(std::move(elements)) {}

Tensor::Tensor(const Tensor &other) = default;
Tensor::Tensor(Tensor &&other) noexcept = default;
Tensor &Tensor::operator=(const Tensor &other) = default;
Tensor &Tensor::operator=(Tensor &&other) noexcept = default;
Tensor::~Tensor() = default;

std::size_t Tensor::dim(unsigned i) const {
  check_dim(i, "dim");
  return shape_[i];
}

Type Tensor::elementType() const { return storage_ ? storage_->type : Type(); }

std::string Tensor::shapeToString() const { return einc::shape_string(shape_); }

Tensor Tensor::slice(std::size_t begin, std::size_t end, unsigned dimension) const {
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
  return remap(*this, shape, [&](std::vector<std::size_t> &index) { index[dimension] += begin; });
}

Tensor Tensor::slice(ArrayRef<std::size_t> begin, ArrayRef<std::size_t> end) const {
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

Tensor Tensor::operator[](std::size_t i) const {
  if (rank() == 0) throw poplar_error("cannot index a scalar tensor");
  Tensor t = slice(i, i + 1, 0);
  t.shape_.erase(t.shape_.begin());
  return t;
}

Tensor Tensor::index(ArrayRef<std::size_t> indices) const {
  Tensor t = *this;
  for (std::size_t i : indices) t = t[i];
  return t;
}

Tensor Tensor::flatten() const { return Tensor(storage_, {numElements()}, elements_); }

Tensor Tensor::flatten(unsigned dimBegin, unsigned dimEnd) const {
  if (dimBegin >= dimEnd || dimEnd > rank()) throw poplar_error("flatten: bad dimension range");
  std::vector<std::size_t> shape(shape_.begin(), shape_.begin() + dimBegin);
  std::size_t n = 1;
  for (unsigned d = dimBegin; d < dimEnd; ++d) n *= shape_[d];
  shape.push_back(n);
  shape.insert(shape.end(), shape_.begin() + dimEnd, shape_.end());
  return Tensor(storage_, shape, elements_);
}

Tensor Tensor::reshape(ArrayRef<std::size_t> shape) const {
  std::vector<std::size_t> s = shape.vec();
  if (einc::product(s) != numElements())
    throw poplar_error("cannot reshape " + shapeToString() + " to " + einc::shape_string(s));
  return Tensor(storage_, s, elements_);
}

Tensor Tensor::dimShuffle(ArrayRef<unsigned> permutation) const {
  if (permutation.size() != rank()) throw poplar_error("dimShuffle: permutation of the wrong rank");
  std::vector<std::size_t> shape(rank());
  for (unsigned d = 0; d < rank(); ++d) {
    check_dim(permutation[d], "dimShuffle");
    shape[d] = shape_[permutation[d]];
  }
  std::vector<unsigned> perm = permutation.vec();
  std::vector<std::size_t> scratch(perm.size());
  return remap(*this, shape, [&](std::vector<std::size_t> &index) {
    for (std::size_t d = 0; d < perm.size(); ++d) scratch[perm[d]] = index[d];
    index = scratch;  // same size: no allocation
  });
}

Tensor Tensor::transpose() const {
  if (rank() != 2) throw poplar_error("transpose needs a rank-2 tensor, got " + shapeToString());
  return dimShuffle({1, 0});
}

Tensor Tensor::reverse(unsigned dimension) const {
  check_dim(dimension, "reverse");
  std::size_t n = shape_[dimension];
  return remap(*this, shape_, [&](std::vector<std::size_t> &index) { index[dimension] = n - 1 - index[dimension]; });
}

Tensor Tensor::subSample(unsigned stride, unsigned dimension) const {
  check_dim(dimension, "subSample");
  std::vector<std::size_t> shape = shape_;
  shape[dimension] = (shape_[dimension] + stride - 1) / stride;
  return remap(*this, shape, [&](std::vector<std::size_t> &index) { index[dimension] *= stride; });
}

Tensor Tensor::broadcast(unsigned N, unsigned dimension) const {
  check_dim(dimension, "broadcast");
  std::vector<std::size_t> shape = shape_;
  std::size_t n = shape_[dimension];
  shape[dimension] *= N;
  return remap(*this, shape, [&](std::vector<std::size_t> &index) { index[dimension] %= n; });
}

Tensor Tensor::expand(ArrayRef<std::size_t> indices) const {
  std::vector<std::size_t> shape = shape_;
  for (std::size_t k = indices.size(); k-- > 0;) shape.insert(shape.begin() + indices[k], 1);
  return Tensor(storage_, shape, elements_);
}

Tensor Tensor::squeeze(ArrayRef<std::size_t> dims) const {
  std::vector<std::size_t> shape;
  for (std::size_t d = 0; d < shape_.size(); ++d) {
    bool drop = false;
    for (std::size_t k : dims) drop = drop || k == d;
    if (drop && shape_[d] != 1) throw poplar_error("squeeze: dimension is not 1");
    if (!drop) shape.push_back(shape_[d]);
  }
  return Tensor(storage_, shape, elements_);
}

void Tensor::check_dim(unsigned d, const char *what) const {
  if (d >= rank())
    throw poplar_error(std::string(what) + ": dimension " + std::to_string(d) + " out of range for " +
                       shapeToString());
}

Tensor concat(ArrayRef<Tensor> tensors, unsigned dimension) {
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

Tensor concat(const Tensor &a, const Tensor &b, unsigned dimension) { return concat({a, b}, dimension); }

}  // namespace poplar
