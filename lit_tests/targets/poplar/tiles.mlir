// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=poplar},legalize-storage-dtypes{target=poplar},canonicalize,cse,split-poplar-vertices" -t poplar | filecheck %s

// Poplar over many tiles: a kernel whose point loop is its whole body, and whose written
// buffers are accessed only at the point's own elements, becomes one vertex per range of
// points, each on its own tile with its own slice of the written buffers and, where the
// loads' indices are affine in the point, the slice of each read-only buffer it reads (a
// linear function of the range, like X's rows below, or a table per vertex); einc_begin,
// einc_end and each slice's first element are plain fields set per vertex.

// A byte output (narrower than the IPU's 32-bit word) runs on one worker per vertex, and its
// ranges are multiples of 4 points: no two tiles write one word.

func.func @bytes_split_on_word_boundaries(%A: tensor<1000xi8> {ein.name = "A"}) -> tensor<1000xi8> {
  %B = ein.einsum "B" assign parallel [N = 1000] : tensor<1000xi8> {
  ^bb0(%N : index):
    %a = ein.load %A[%N] : tensor<1000xi8>
    %b = arith.addi %a, %a : i8
    ein.yield %b : i8
  }
  func.return %B : tensor<1000xi8>
}

// CHECK:      #include <poplar/Vertex.hpp>
// CHECK-NEXT: #include <cmath>
// CHECK-EMPTY:
// CHECK-NEXT: class bytes_split_on_word_boundaries_B_{{[0-9a-f]+}} : public poplar::MultiVertex {
// CHECK-NEXT: public:
// CHECK-NEXT:   poplar::Input<poplar::Vector<signed char>> A;
// CHECK-NEXT:   poplar::Output<poplar::Vector<signed char>> B;
// CHECK-NEXT:   int einc_begin;
// CHECK-NEXT:   int einc_end;
// CHECK-NEXT:   int einc_base0;
// CHECK-NEXT:   int einc_base1;
// CHECK-NEXT:   bool compute(unsigned workerId) {
// CHECK-NEXT:     if (workerId >= 1) return true;
// CHECK-NEXT:     int gid = (int)workerId;
// CHECK-NEXT:     for (int N = einc_begin + gid; N < einc_end; N++) {
// CHECK-NEXT:       signed char a = A[N - einc_base0];
// CHECK-NEXT:       B[N - einc_base1] = (signed char)(a + a);
// CHECK-NEXT:     }
// CHECK-NEXT:     return true;
// CHECK-NEXT:   }
// CHECK-NEXT: };
// CHECK-EMPTY:
// CHECK-NEXT: #ifdef EINC_POPLAR_HOST
// CHECK-NEXT: #include <algorithm>
// CHECK-NEXT: #include <poplar/Graph.hpp>
// CHECK-NEXT: #include <poplar/Program.hpp>
// CHECK-EMPTY:
// CHECK-NEXT: EINC_POPLAR_VERTEX(bytes_split_on_word_boundaries_B_{{[0-9a-f]+}}, A, B, einc_begin, einc_end, einc_base0, einc_base1)
// CHECK-EMPTY:
// CHECK-NEXT: void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers, poplar::program::Sequence &prog) {
// CHECK-NEXT:   for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
// CHECK-NEXT:   poplar::ComputeSet cs0 = graph.addComputeSet("bytes_split_on_word_boundaries_B");
// CHECK-NEXT:   for (unsigned tile = 0; tile < 125; ++tile) {
// CHECK-NEXT:     unsigned begin = tile * 8, end = std::min(begin + 8u, 1000u);
// CHECK-NEXT:     poplar::VertexRef v = graph.addVertex(cs0, "bytes_split_on_word_boundaries_B_{{[0-9a-f]+}}", {{[{][{]}}"A", buffers[0].flatten().slice(begin, end)}, {"B", buffers[1].flatten().slice(begin, end)}});
// CHECK-NEXT:     graph.setInitialValue(v["einc_begin"], begin);
// CHECK-NEXT:     graph.setInitialValue(v["einc_end"], end);
// CHECK-NEXT:     graph.setInitialValue(v["einc_base0"], begin);
// CHECK-NEXT:     graph.setInitialValue(v["einc_base1"], begin);
// CHECK-NEXT:     graph.setTileMapping(v, tile);
// CHECK-NEXT:     graph.setTileMapping(buffers[1].flatten().slice(begin, end), tile);
// CHECK-NEXT:   }
// CHECK-NEXT:   prog.add(poplar::program::Execute(cs0));
// CHECK-NEXT: }
// CHECK-NEXT: #endif  // EINC_POPLAR_HOST

// -----

// A reduction: each vertex owns whole output elements (its InOut slice of S), the fill and
// the accumulation of each element included; X is read whole.

func.func @row_sums_own_whole_outputs(%X: tensor<96x40xf32> {ein.name = "X"}) -> tensor<96xf32> {
  %S = ein.einsum "S" add parallel [N = 96] reduce [C = 40] : tensor<96xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<96x40xf32>
    ein.yield %x : f32
  }
  func.return %S : tensor<96xf32>
}

// CHECK:      #include <poplar/Vertex.hpp>
// CHECK-NEXT: #include <cmath>
// CHECK-EMPTY:
// CHECK-NEXT: class row_sums_own_whole_outputs_S_{{[0-9a-f]+}} : public poplar::MultiVertex {
// CHECK-NEXT: public:
// CHECK-NEXT:   poplar::Input<poplar::Vector<float>> X;
// CHECK-NEXT:   poplar::InOut<poplar::Vector<float>> S;
// CHECK-NEXT:   int einc_begin;
// CHECK-NEXT:   int einc_end;
// CHECK-NEXT:   int einc_base0;
// CHECK-NEXT:   int einc_base1;
// CHECK-NEXT:   bool compute(unsigned workerId) {
// CHECK-NEXT:     int gid = (int)workerId;
// CHECK-NEXT:     for (int N = einc_begin + gid; N < einc_end; N += 6) {
// CHECK-NEXT:       S[N - einc_base1] = 0.0f;
// CHECK-NEXT:       for (int C = 0; C < 40; C++) {
// CHECK-NEXT:         S[N - einc_base1] = S[N - einc_base1] + X[N * 40 + C - einc_base0];
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:     return true;
// CHECK-NEXT:   }
// CHECK-NEXT: };
// CHECK-EMPTY:
// CHECK-NEXT: #ifdef EINC_POPLAR_HOST
// CHECK-NEXT: #include <algorithm>
// CHECK-NEXT: #include <poplar/Graph.hpp>
// CHECK-NEXT: #include <poplar/Program.hpp>
// CHECK-EMPTY:
// CHECK-NEXT: EINC_POPLAR_VERTEX(row_sums_own_whole_outputs_S_{{[0-9a-f]+}}, X, S, einc_begin, einc_end, einc_base0, einc_base1)
// CHECK-EMPTY:
// CHECK-NEXT: void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers, poplar::program::Sequence &prog) {
// CHECK-NEXT:   for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
// CHECK-NEXT:   poplar::ComputeSet cs0 = graph.addComputeSet("row_sums_own_whole_outputs_S");
// CHECK-NEXT:   for (unsigned tile = 0; tile < 2; ++tile) {
// CHECK-NEXT:     unsigned begin = tile * 48, end = std::min(begin + 48u, 96u);
// CHECK-NEXT:     poplar::VertexRef v = graph.addVertex(cs0, "row_sums_own_whole_outputs_S_{{[0-9a-f]+}}", {{[{][{]}}"X", buffers[0].flatten().slice(begin * 40, end * 40)}, {"S", buffers[1].flatten().slice(begin, end)}});
// CHECK-NEXT:     graph.setInitialValue(v["einc_begin"], begin);
// CHECK-NEXT:     graph.setInitialValue(v["einc_end"], end);
// CHECK-NEXT:     graph.setInitialValue(v["einc_base0"], begin * 40);
// CHECK-NEXT:     graph.setInitialValue(v["einc_base1"], begin);
// CHECK-NEXT:     graph.setTileMapping(v, tile);
// CHECK-NEXT:     graph.setTileMapping(buffers[1].flatten().slice(begin, end), tile);
// CHECK-NEXT:   }
// CHECK-NEXT:   prog.add(poplar::program::Execute(cs0));
// CHECK-NEXT: }
// CHECK-NEXT: #endif  // EINC_POPLAR_HOST
