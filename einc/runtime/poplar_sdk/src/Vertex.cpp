// einc's CPU mirror of the Poplar API (see einc/runtime/poplar.py). Not Graphcore's code.
// Vertex fields (include/poplar/Vertex.hpp), compiled once into the mirror's library.
#include <cstring>
#include <string>

#include <poplar/Vertex.hpp>

namespace poplar {
namespace einc {

Field::~Field() = default;
void Field::connect_list(const std::vector<Tensor> &) { throw graph_connection_error("field is not a list of edges"); }
Field &Field::element(std::size_t) { throw graph_connection_error("field is not a list of edges"); }
void Field::set_size(std::size_t) { throw graph_connection_error("field is not a list of edges"); }
void Field::set_initial_value(double) { throw graph_connection_error("field is an edge, not a plain value"); }
void Field::gather() {}
void Field::scatter() {}
void Field::accesses(std::vector<Access> &) const {}
std::size_t Field::bytes() const { return 0; }

void Edge::bind(const Tensor &t, const Type &want, std::size_t count_or_zero) {
  if (!t.valid()) throw graph_connection_error("connecting an invalid tensor");
  if (t.elementType() != want)
    throw graph_connection_error("a " + want.toString() + " field connected to a " + t.elementType().toString() +
                                 " tensor");
  if (count_or_zero != 0 && t.numElements() != count_or_zero)
    throw graph_connection_error("a scalar field connected to a tensor of " + std::to_string(t.numElements()) +
                                 " elements");
  tensor_ = t;
}

std::size_t Edge::bytes() const { return bound() ? aligned_bytes(size() * tensor_.elementType().einc_size()) : 0; }

void Edge::read(void *dst) const {
  auto &s = *tensor_.einc_storage();
  std::size_t w = s.type.einc_size();
  auto *out = static_cast<unsigned char *>(dst);
  for (std::size_t i = 0; i < tensor_.numElements(); ++i)
    std::memcpy(out + i * w, s.element(tensor_.einc_elements()[i]), w);
}

void Edge::write(const void *src) const {
  auto &s = *tensor_.einc_storage();
  if (s.constant) throw poplar_error("a vertex writes to constant '" + s.name + "'");
  std::size_t w = s.type.einc_size();
  auto *in = static_cast<const unsigned char *>(src);
  for (std::size_t i = 0; i < tensor_.numElements(); ++i)
    std::memcpy(s.element(tensor_.einc_elements()[i]), in + i * w, w);
}

void Edge::accesses(std::vector<Access> &out, Direction d) const {
  for (std::size_t e : tensor_.einc_elements()) {
    if (d != Direction::Out) out.push_back({tensor_.einc_storage().get(), e, false});
    if (d != Direction::In) out.push_back({tensor_.einc_storage().get(), e, true});
  }
}

void index_error(std::size_t i, std::size_t size) {
  throw poplar_error("a vertex indexes element " + std::to_string(static_cast<long long>(i)) +
                     " of a field connected to " + std::to_string(size) + " elements");
}

Edges::~Edges() = default;

void Edges::connect(const Tensor &t) {
  if (t.rank() < 1) throw graph_connection_error("a list of edges needs a tensor of rank >= 1");
  set_size(t.dim(0));
  for (std::size_t i = 0; i < items_.size(); ++i) items_[i]->connect(t[i]);
}

void Edges::connect_list(const std::vector<Tensor> &ts) {
  set_size(ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) items_[i]->connect(ts[i]);
}

Field &Edges::element(std::size_t i) {
  if (i >= items_.size())
    throw graph_connection_error("edge " + std::to_string(i) + " of a list of " + std::to_string(items_.size()) +
                                 " (call setFieldSize first)");
  return *items_[i];
}

void Edges::set_size(std::size_t n) {
  items_.clear();
  for (std::size_t i = 0; i < n; ++i) items_.push_back(make_item());
}

bool Edges::ready() const {
  for (auto &item : items_)
    if (!item->ready()) return false;
  return true;
}

void Edges::gather() {
  for (auto &item : items_) item->gather();
}

void Edges::scatter() {
  for (auto &item : items_) item->scatter();
}

void Edges::accesses(std::vector<Access> &out) const {
  for (auto &item : items_) item->accesses(out);
}

std::size_t Edges::bytes() const {
  std::size_t n = 0;
  for (auto &item : items_) n += item->bytes();
  return n;
}

}  // namespace einc
}  // namespace poplar
