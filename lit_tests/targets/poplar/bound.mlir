// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,einc-apply-schedule,legalize-f16-for-c,convert-affine-to-egpu{target=poplar},legalize-storage-dtypes{target=poplar},canonicalize,cse,split-poplar-vertices" -t poplar | filecheck %s

// Loops bound to work-item ids on Poplar: the blocks (N.o on block.x, M on block.y: 3 x 3)
// run one after another in every worker (einc_block), the threads (N.i on thread.x, 4) are
// the workers; the partial last tile of N is guarded. The vertex is one, on tile 0, with
// whole tensors.

func.func @blocks_in_turn_threads_on_workers(%X: tensor<10x3xf32> {ein.name = "X"}) -> tensor<10x3xf32> {
  %Y = ein.einsum "Y" assign parallel [N = 10, M = 3] : tensor<10x3xf32> {
  ^bb0(%N : index, %M : index):
    %x = ein.load %X[%N, %M] : tensor<10x3xf32>
    %y = arith.addf %x, %x : f32
    ein.yield %y : f32
  }
  func.return %Y : tensor<10x3xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "Y" axis "N" in %root
  %m = transform.einc.match stmt "Y" axis "M" in %root
  %no, %ni = transform.einc.tile %n by 4
  transform.einc.bind %no to "block.x"
  transform.einc.bind %ni to "thread.x" max_threads 6
  transform.einc.bind %m to "block.y"
  transform.yield
}

// CHECK:      #include <poplar/Vertex.hpp>
// CHECK-NEXT: #include <cmath>
// CHECK-EMPTY:
// CHECK-NEXT: static inline int einc_minsi_i64(int a, int b) { return a < b ? a : b; }
// CHECK-EMPTY:
// CHECK-NEXT: class blocks_in_turn_threads_on_workers_Y_{{[0-9a-f]+}} : public poplar::MultiVertex {
// CHECK-NEXT: public:
// CHECK-NEXT:   poplar::Input<poplar::Vector<float>> X;
// CHECK-NEXT:   poplar::Output<poplar::Vector<float>> Y;
// CHECK-NEXT:   bool compute(unsigned workerId) {
// CHECK-NEXT:     if (workerId >= 4) return true;
// CHECK-NEXT:     for (int einc_block = 0; einc_block < 9; ++einc_block) {
// CHECK-NEXT:       int einc_thread = (int)workerId;
// CHECK-NEXT:       int block_x = einc_block % 3;
// CHECK-NEXT:       int N_o = block_x * 4;
// CHECK-NEXT:       int N_i = einc_thread;
// CHECK-NEXT:       int M = einc_block / 3;
// CHECK-NEXT:       if (N_i < einc_minsi_i64(4, N_o * -1 + 10)) {
// CHECK-NEXT:         float x = X[N_o * 3 + N_i * 3 + M];
// CHECK-NEXT:         Y[N_o * 3 + N_i * 3 + M] = x + x;
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
// CHECK-NEXT: EINC_POPLAR_VERTEX(blocks_in_turn_threads_on_workers_Y_{{[0-9a-f]+}}, X, Y)
// CHECK-EMPTY:
// CHECK-NEXT: void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers, poplar::program::Sequence &prog) {
// CHECK-NEXT:   for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
// CHECK-NEXT:   poplar::ComputeSet cs0 = graph.addComputeSet("blocks_in_turn_threads_on_workers_Y");
// CHECK-NEXT:   poplar::VertexRef v0 = graph.addVertex(cs0, "blocks_in_turn_threads_on_workers_Y_{{[0-9a-f]+}}", {{[{][{]}}"X", buffers[0].flatten()}, {"Y", buffers[1].flatten()}});
// CHECK-NEXT:   graph.setTileMapping(v0, 0);
// CHECK-NEXT:   prog.add(poplar::program::Execute(cs0));
// CHECK-NEXT: }
// CHECK-NEXT: #endif  // EINC_POPLAR_HOST

// -----

// Byte stores (narrower than the IPU's 32-bit word): two workers must not write one word,
// so worker 0 runs the block's three threads in turn.

func.func @byte_stores_on_one_worker(%X: tensor<9xi8> {ein.name = "X"}) -> tensor<9xi8> {
  %Y = ein.einsum "Y" assign parallel [N = 9] : tensor<9xi8> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<9xi8>
    %y = arith.addi %x, %x : i8
    ein.yield %y : i8
  }
  func.return %Y : tensor<9xi8>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "Y" axis "N" in %root
  %no, %ni = transform.einc.tile %n by 3
  transform.einc.bind %no to "block.x"
  transform.einc.bind %ni to "thread.x" max_threads 6
  transform.yield
}

// CHECK:      #include <poplar/Vertex.hpp>
// CHECK-NEXT: #include <cmath>
// CHECK-EMPTY:
// CHECK-NEXT: class byte_stores_on_one_worker_Y_{{[0-9a-f]+}} : public poplar::MultiVertex {
// CHECK-NEXT: public:
// CHECK-NEXT:   poplar::Input<poplar::Vector<signed char>> X;
// CHECK-NEXT:   poplar::Output<poplar::Vector<signed char>> Y;
// CHECK-NEXT:   bool compute(unsigned workerId) {
// CHECK-NEXT:     if (workerId >= 1) return true;
// CHECK-NEXT:     for (int einc_block = 0; einc_block < 3; ++einc_block) {
// CHECK-NEXT:       for (int einc_thread = 0; einc_thread < 3; ++einc_thread) {
// CHECK-NEXT:         int block_x = einc_block;
// CHECK-NEXT:         int N_o = block_x * 3;
// CHECK-NEXT:         int N_i = einc_thread;
// CHECK-NEXT:         signed char x = X[N_o + N_i];
// CHECK-NEXT:         Y[N_o + N_i] = (signed char)(x + x);
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
// CHECK-NEXT: EINC_POPLAR_VERTEX(byte_stores_on_one_worker_Y_{{[0-9a-f]+}}, X, Y)
// CHECK-EMPTY:
// CHECK-NEXT: void einc_build_graph(poplar::Graph &graph, const std::vector<poplar::Tensor> &buffers, poplar::program::Sequence &prog) {
// CHECK-NEXT:   for (const poplar::Tensor &buffer : buffers) graph.setTileMapping(buffer, 0);
// CHECK-NEXT:   poplar::ComputeSet cs0 = graph.addComputeSet("byte_stores_on_one_worker_Y");
// CHECK-NEXT:   poplar::VertexRef v0 = graph.addVertex(cs0, "byte_stores_on_one_worker_Y_{{[0-9a-f]+}}", {{[{][{]}}"X", buffers[0].flatten()}, {"Y", buffers[1].flatten()}});
// CHECK-NEXT:   graph.setTileMapping(v0, 0);
// CHECK-NEXT:   prog.add(poplar::program::Execute(cs0));
// CHECK-NEXT: }
// CHECK-NEXT: #endif  // EINC_POPLAR_HOST
