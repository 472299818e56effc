// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace poplar {

// A non-owning view of contiguous elements; built from a vector, a braced list or a
// pointer and a size. A braced list lives until the end of the full expression.
template <class T> class ArrayRef {
 public:
  ArrayRef() = default;
  ArrayRef(const T *data, std::size_t size) : data_(data), size_(size) {}
  ArrayRef(const std::vector<T> &v) : data_(v.data()), size_(v.size()) {}
  ArrayRef(std::initializer_list<T> list) : data_(list.begin()), size_(list.size()) {}
  template <std::size_t N> ArrayRef(const T (&array)[N]) : data_(array), size_(N) {}

  const T *begin() const { return data_; }
  const T *end() const { return data_ + size_; }
  const T *data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T &operator[](std::size_t i) const { return data_[i]; }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

 private:
  const T *data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace poplar
