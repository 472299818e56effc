// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

// The IPU's 16-bit float: a builtin type for popc; the mirror uses GCC's _Float16
// (IEEE binary16, the same bits as NumPy's float16).
using half = _Float16;

namespace poplar {

class Type {
 public:
  enum class Kind { Float, Signed, Unsigned, Bool };

  constexpr Type() = default;
  constexpr Type(const char *name, unsigned size, Kind kind) : name_(name), size_(size), kind_(kind) {}

  std::string toString() const { return name_; }
  bool operator==(const Type &other) const { return std::strcmp(name_, other.name_) == 0; }
  bool operator!=(const Type &other) const { return !(*this == other); }
  bool operator<(const Type &other) const { return std::strcmp(name_, other.name_) < 0; }

  // mirror-only: bytes per element and the kind of number
  unsigned einc_size() const { return size_; }
  Kind einc_kind() const { return kind_; }

 private:
  const char *name_ = "<none>";
  unsigned size_ = 0;
  Kind kind_ = Kind::Float;
};

inline const Type FLOAT{"float", 4, Type::Kind::Float};
inline const Type HALF{"half", 2, Type::Kind::Float};
inline const Type INT{"int", 4, Type::Kind::Signed};
inline const Type UNSIGNED_INT{"unsigned int", 4, Type::Kind::Unsigned};
inline const Type SHORT{"short", 2, Type::Kind::Signed};
inline const Type UNSIGNED_SHORT{"unsigned short", 2, Type::Kind::Unsigned};
inline const Type CHAR{"char", 1, Type::Kind::Signed};
inline const Type SIGNED_CHAR{"signed char", 1, Type::Kind::Signed};
inline const Type UNSIGNED_CHAR{"unsigned char", 1, Type::Kind::Unsigned};
inline const Type BOOL{"bool", 1, Type::Kind::Bool};
inline const Type LONGLONG{"long long", 8, Type::Kind::Signed};
inline const Type UNSIGNED_LONGLONG{"unsigned long long", 8, Type::Kind::Unsigned};

template <class T> struct equivalent_device_type;
#define EINC_POPLAR_DEVICE_TYPE(CType, PoplarType) \
  template <> struct equivalent_device_type<CType> { \
    static const Type &value() { return PoplarType; } \
  };
EINC_POPLAR_DEVICE_TYPE(float, FLOAT)
EINC_POPLAR_DEVICE_TYPE(half, HALF)
EINC_POPLAR_DEVICE_TYPE(int, INT)
EINC_POPLAR_DEVICE_TYPE(unsigned, UNSIGNED_INT)
EINC_POPLAR_DEVICE_TYPE(short, SHORT)
EINC_POPLAR_DEVICE_TYPE(unsigned short, UNSIGNED_SHORT)
EINC_POPLAR_DEVICE_TYPE(char, CHAR)
EINC_POPLAR_DEVICE_TYPE(signed char, SIGNED_CHAR)
EINC_POPLAR_DEVICE_TYPE(unsigned char, UNSIGNED_CHAR)
EINC_POPLAR_DEVICE_TYPE(bool, BOOL)
EINC_POPLAR_DEVICE_TYPE(long long, LONGLONG)
EINC_POPLAR_DEVICE_TYPE(unsigned long long, UNSIGNED_LONGLONG)
#undef EINC_POPLAR_DEVICE_TYPE

}  // namespace poplar
