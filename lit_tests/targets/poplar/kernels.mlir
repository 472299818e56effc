// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=poplar},legalize-storage-dtypes{target=poplar},canonicalize,cse,split-poplar-vertices" -t poplar | filecheck %s

// Poplar: a MultiVertex codelet per kernel (workers stride over the points, spare workers
// return at once) and the graph description connecting flattened tensors: a small kernel is
// one vertex on tile 0; a larger one (Y, 300 points) is one vertex per 43-point range, each
// on its own tile with its slice of Y, of X, and of Mx (a table of each vertex's rows;
// tiles.mlir has more).

func.func @matmul(%A: tensor<4x3xf32> {ein.name = "A"}, %B: tensor<3x5xf32> {ein.name = "B"}) -> tensor<4x5xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 5] reduce [K = 3] : tensor<4x5xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x3xf32>
    %b = ein.load %B[%K, %M] : tensor<3x5xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<4x5xf32>
}

// CHECK:      #include <poplar/Vertex.hpp>
// CHECK-NEXT: #include <cmath>
// CHECK-EMPTY:
// CHECK-NEXT: class matmul_C_{{[0-9a-f]+}} : public poplar::MultiVertex {
// CHECK-NEXT: public:
// CHECK-NEXT:   poplar::Input<poplar::Vector<float>> A;
// CHECK-NEXT:   poplar::Input<poplar::Vector<float>> B;
// CHECK-NEXT:   poplar::InOut<poplar::Vector<float>> C;
// CHECK-NEXT:   bool compute(unsigned workerId) {
// CHECK-NEXT:     int gid = (int)workerId;
// CHECK-NEXT:     for (int point = gid; point < 20; point += 6) {
// CHECK-NEXT:       int N = point / 5;
// CHECK-NEXT:       int M = point % 5;
// CHECK-NEXT:       C[N * 5 + M] = 0.0f;
// CHECK-NEXT:       for (int K = 0; K < 3; K++) {
// CHECK-NEXT:         C[N * 5 + M] = C[N * 5 + M] + A[N * 3 + K] * B[K * 5 + M];
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
// CHECK-NEXT: EINC_POPLAR_VERTEX(matmul_C_{{[0-9a-f]+}}, A, B, C)
// CHECK-EMPTY:
// CHECK-NEXT: void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers, poplar::program::Sequence &prog) {
// CHECK-NEXT:   for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
// CHECK-NEXT:   poplar::ComputeSet cs0 = graph.addComputeSet("matmul_C");
// CHECK-NEXT:   poplar::VertexRef v0 = graph.addVertex(cs0, "matmul_C_{{[0-9a-f]+}}", {{[{][{]}}"A", buffers[0].flatten()}, {"B", buffers[1].flatten()}, {"C", buffers[2].flatten()}});
// CHECK-NEXT:   graph.setTileMapping(v0, 0);
// CHECK-NEXT:   prog.add(poplar::program::Execute(cs0));
// CHECK-NEXT: }
// CHECK-NEXT: #endif  // EINC_POPLAR_HOST

// -----

func.func @row_max_then_scale(%X: tensor<3x100xf32> {ein.name = "X"}) -> tensor<3x100xf32> {
  %m = ein.einsum "Mx" max parallel [N = 3] reduce [C = 100] : tensor<3xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x100xf32>
    ein.yield %x : f32
  }
  %y = ein.einsum "Y" assign parallel [N = 3, C = 100] : tensor<3x100xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x100xf32>
    %s = ein.load %m[%N] : tensor<3xf32>
    %e = math.exp %x : f32
    %d = arith.divf %e, %s : f32
    ein.yield %d : f32
  }
  func.return %y : tensor<3x100xf32>
}

// CHECK:      #include <poplar/Vertex.hpp>
// CHECK-NEXT: #include <cmath>
// CHECK-EMPTY:
// CHECK-NEXT: static inline float einc_maximumf_f32(float a, float b) { float r = a > b ? a : b; r = b != b ? b : r; r = a != a ? a : r; return ((a == 0) & (b == 0)) ? a + b : r; }
// CHECK-EMPTY:
// CHECK-NEXT: class row_max_then_scale_Mx_{{[0-9a-f]+}} : public poplar::MultiVertex {
// CHECK-NEXT: public:
// CHECK-NEXT:   poplar::Input<poplar::Vector<float>> X;
// CHECK-NEXT:   poplar::InOut<poplar::Vector<float>> Mx;
// CHECK-NEXT:   bool compute(unsigned workerId) {
// CHECK-NEXT:     if (workerId >= 3) return true;
// CHECK-NEXT:     int N = (int)workerId;
// CHECK-NEXT:     Mx[N] = -INFINITY;
// CHECK-NEXT:     for (int C = 0; C < 100; C++) {
// CHECK-NEXT:       Mx[N] = einc_maximumf_f32(Mx[N], X[N * 100 + C]);
// CHECK-NEXT:     }
// CHECK-NEXT:     return true;
// CHECK-NEXT:   }
// CHECK-NEXT: };
// CHECK-EMPTY:
// CHECK-NEXT: class row_max_then_scale_Y_{{[0-9a-f]+}} : public poplar::MultiVertex {
// CHECK-NEXT: public:
// CHECK-NEXT:   poplar::Input<poplar::Vector<float>> X;
// CHECK-NEXT:   poplar::Output<poplar::Vector<float>> Y;
// CHECK-NEXT:   poplar::Input<poplar::Vector<float>> Mx;
// CHECK-NEXT:   int einc_begin;
// CHECK-NEXT:   int einc_end;
// CHECK-NEXT:   int einc_base0;
// CHECK-NEXT:   int einc_base1;
// CHECK-NEXT:   int einc_base2;
// CHECK-NEXT:   bool compute(unsigned workerId) {
// CHECK-NEXT:     int gid = (int)workerId;
// CHECK-NEXT:     for (int point = einc_begin + gid; point < einc_end; point += 6) {
// CHECK-NEXT:       int N = point / 100;
// CHECK-NEXT:       int C = point % 100;
// CHECK-NEXT:       Y[N * 100 + C - einc_base1] = expf(X[N * 100 + C - einc_base0]) / Mx[N - einc_base2];
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
// CHECK-NEXT: EINC_POPLAR_VERTEX(row_max_then_scale_Mx_{{[0-9a-f]+}}, X, Mx)
// CHECK-NEXT: EINC_POPLAR_VERTEX(row_max_then_scale_Y_{{[0-9a-f]+}}, X, Y, Mx, einc_begin, einc_end, einc_base0, einc_base1, einc_base2)
// CHECK-EMPTY:
// CHECK-NEXT: void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers, poplar::program::Sequence &prog) {
// CHECK-NEXT:   for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
// CHECK-NEXT:   poplar::ComputeSet cs0 = graph.addComputeSet("row_max_then_scale_Mx");
// CHECK-NEXT:   poplar::VertexRef v0 = graph.addVertex(cs0, "row_max_then_scale_Mx_{{[0-9a-f]+}}", {{[{][{]}}"X", buffers[0].flatten()}, {"Mx", buffers[2].flatten()}});
// CHECK-NEXT:   graph.setTileMapping(v0, 0);
// CHECK-NEXT:   prog.add(poplar::program::Execute(cs0));
// CHECK-NEXT:   poplar::ComputeSet cs1 = graph.addComputeSet("row_max_then_scale_Y");
// CHECK-NEXT:   static const unsigned einc_first1_2[7] = {0, 0, 0, 1, 1, 2, 2};
// CHECK-NEXT:   static const unsigned einc_end1_2[7] = {1, 1, 2, 2, 3, 3, 3};
// CHECK-NEXT:   for (unsigned tile = 0; tile < 7; ++tile) {
// CHECK-NEXT:     unsigned begin = tile * 43, end = std::min(begin + 43u, 300u);
// CHECK-NEXT:     poplar::VertexRef v = graph.addVertex(cs1, "row_max_then_scale_Y_{{[0-9a-f]+}}", {{[{][{]}}"X", buffers[0].flatten().slice(begin, end)}, {"Y", buffers[1].flatten().slice(begin, end)}, {"Mx", buffers[2].flatten().slice(einc_first1_2[tile], einc_end1_2[tile])}});
// CHECK-NEXT:     graph.setInitialValue(v["einc_begin"], begin);
// CHECK-NEXT:     graph.setInitialValue(v["einc_end"], end);
// CHECK-NEXT:     graph.setInitialValue(v["einc_base0"], begin);
// CHECK-NEXT:     graph.setInitialValue(v["einc_base1"], begin);
// CHECK-NEXT:     graph.setInitialValue(v["einc_base2"], einc_first1_2[tile]);
// CHECK-NEXT:     graph.setTileMapping(v, tile);
// CHECK-NEXT:     graph.setTileMapping(buffers[1].flatten().slice(begin, end), tile);
// CHECK-NEXT:   }
// CHECK-NEXT:   prog.add(poplar::program::Execute(cs1));
// CHECK-NEXT: }
// CHECK-NEXT: #endif  // EINC_POPLAR_HOST

// -----

func.func @halves_and_bytes(%H: tensor<8xf16> {ein.name = "H"}, %Q: tensor<8xi8> {ein.name = "Q"}) -> tensor<8xf16> {
  %y = ein.einsum "Y" assign parallel [N = 8] : tensor<8xf16> {
  ^bb0(%N : index):
    %h = ein.load %H[%N] : tensor<8xf16>
    %i = ein.load %Q[%N] : tensor<8xi8>
    %s = arith.addi %i, %i : i8
    %f = arith.sitofp %s : i8 to f16
    %p = arith.mulf %h, %f : f16
    ein.yield %p : f16
  }
  func.return %y : tensor<8xf16>
}

// CHECK:      #include <poplar/Vertex.hpp>
// CHECK-NEXT: #include <cmath>
// CHECK-EMPTY:
// CHECK-NEXT: class halves_and_bytes_Y_{{[0-9a-f]+}} : public poplar::MultiVertex {
// CHECK-NEXT: public:
// CHECK-NEXT:   poplar::Input<poplar::Vector<half>> H;
// CHECK-NEXT:   poplar::Input<poplar::Vector<signed char>> Q;
// CHECK-NEXT:   poplar::Output<poplar::Vector<half>> Y;
// CHECK-NEXT:   bool compute(unsigned workerId) {
// CHECK-NEXT:     if (workerId >= 1) return true;
// CHECK-NEXT:     int gid = (int)workerId;
// CHECK-NEXT:     for (int N = gid; N < 8; N++) {
// CHECK-NEXT:       signed char i = Q[N];
// CHECK-NEXT:       Y[N] = (half)((float)H[N] * (float)(half)(signed char)(i + i));
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
// CHECK-NEXT: EINC_POPLAR_VERTEX(halves_and_bytes_Y_{{[0-9a-f]+}}, H, Q, Y)
// CHECK-EMPTY:
// CHECK-NEXT: void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers, poplar::program::Sequence &prog) {
// CHECK-NEXT:   for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
// CHECK-NEXT:   poplar::ComputeSet cs0 = graph.addComputeSet("halves_and_bytes_Y");
// CHECK-NEXT:   poplar::VertexRef v0 = graph.addVertex(cs0, "halves_and_bytes_Y_{{[0-9a-f]+}}", {{[{][{]}}"H", buffers[0].flatten()}, {"Q", buffers[1].flatten()}, {"Y", buffers[2].flatten()}});
// CHECK-NEXT:   graph.setTileMapping(v0, 0);
// CHECK-NEXT:   prog.add(poplar::program::Execute(cs0));
// CHECK-NEXT: }
// CHECK-NEXT: #endif  // EINC_POPLAR_HOST
