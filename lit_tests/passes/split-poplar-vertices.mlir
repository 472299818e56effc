// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,legalize-float-to-int,convert-affine-to-egpu{target=poplar},legalize-storage-dtypes{target=poplar},einc-vectorize-loops{target=poplar},canonicalize,cse,split-poplar-vertices" | filecheck %s
// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,legalize-float-to-int,convert-affine-to-egpu{target=poplar},legalize-storage-dtypes{target=poplar},einc-vectorize-loops{target=poplar},canonicalize,cse,split-poplar-vertices" | einc-opt --split-input-file | filecheck %s
// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,legalize-float-to-int,convert-affine-to-egpu{target=poplar},legalize-storage-dtypes{target=poplar},einc-vectorize-loops{target=poplar},canonicalize,cse,split-poplar-vertices" | einc-opt --split-input-file -t poplar | filecheck %s --check-prefix=CXX
// RUN: not einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,legalize-float-to-int,convert-affine-to-egpu{target=poplar},legalize-storage-dtypes{target=poplar},einc-vectorize-loops{target=poplar},canonicalize,cse" -t poplar 2>&1 | filecheck %s --check-prefix=ERR

// split-poplar-vertices (the end of the Poplar pipeline) records on every egpu.func how it
// spreads over the IPU's tiles, #egpu.tile_split: a kernel whose point loop is its whole
// body, writing each buffer only at s * point + c, is cut into vertices of `chunk` points
// (at least 8 per worker, at most 1472 vertices, more while a vertex's `bytes` exceed a
// tile's memory); each read-only buffer whose loads it bounds is connected as one slice per
// vertex (from first to end elements). Any other kernel, or one with few points, is one
// vertex; when no range fits, the points are cut into boxes of the written buffer's shape (the
// matmul below). The attribute round-trips through the printer and parser (second RUN), and the
// Poplar printer prints the split from it alone (third RUN); without it, printing is an
// internal error, not a silent recompute (fourth RUN).

// Scaling by a group factor: X is read at the point (a linear slice), M at point / 100 (a
// table of slices, one per vertex).

func.func @scale_by_group(%X: tensor<300xf32> {ein.name = "X"}, %M: tensor<3xf32> {ein.name = "M"}) -> tensor<300xf32> {
  %Y = ein.einsum "Y" assign parallel [N = 300] : tensor<300xf32> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<300xf32>
    %g = affine.apply affine_map<(d0) -> (d0 floordiv 100)> (%N)
    %m = ein.load %M[%g] : tensor<3xf32>
    %y = arith.mulf %x, %m : f32
    ein.yield %y : f32
  }
  func.return %Y : tensor<300xf32>
}

// CHECK:      egpu.func @scale_by_group_Y(%X: memref<300xf32> {ein.name = "X"}, %M: memref<3xf32> {ein.name = "M"}, %Y: memref<300xf32> {ein.name = "Y"}) grid [1, 1, 1] block [6, 1, 1] attributes {egpu.tile_split = #egpu.tile_split<vertices = 7, bytes = 380, points = 300, chunk = 43, written = [2 at 1 * point + 0], read = [0 from [0, 43, 86, 129, 172, 215, 258] to [43, 86, 129, 172, 215, 258, 300], 1 from [0, 0, 0, 1, 1, 2, 2] to [1, 1, 2, 2, 3, 3, 3]]>} {

// CXX:      static const unsigned einc_first0_1[7] = {0, 0, 0, 1, 1, 2, 2};
// CXX-NEXT: static const unsigned einc_end0_1[7] = {1, 1, 2, 2, 3, 3, 3};
// CXX-NEXT: for (unsigned tile = 0; tile < 7; ++tile) {
// CXX-NEXT:   unsigned begin = tile * 43, end = std::min(begin + 43u, 300u);
// CXX-NEXT:   poplar::VertexRef v = graph.addVertex(cs0, "scale_by_group_Y_{{[0-9a-f]+}}", {{[{][{]}}"X", buffers[0].flatten().slice(begin, end)}, {"M", buffers[1].flatten().slice(einc_first0_1[tile], einc_end0_1[tile])}, {"Y", buffers[2].flatten().slice(begin, end)}});

// ERR: internal compiler error in stage '{{.*}}': AssertionError: poplar target: kernel scale_by_group_Y has no egpu.tile_split attribute (the split-poplar-vertices pass did not run)

// -----

// A gather: I is read at the point (a slice), X at a loaded index the analysis cannot bound
// (connected whole: not in `read`).

func.func @gather(%X: tensor<50xf32> {ein.name = "X"}, %I: tensor<300xi32> {ein.name = "I"}) -> tensor<300xf32> {
  %Y = ein.einsum "Y" assign parallel [N = 300] : tensor<300xf32> {
  ^bb0(%N : index):
    %i = ein.load %I[%N] : tensor<300xi32>
    %j = arith.index_cast %i : i32 to index
    %x = ein.load %X[%j] : tensor<50xf32>
    ein.yield %x : f32
  }
  func.return %Y : tensor<300xf32>
}


// CHECK:      egpu.func @gather_Y(%X: memref<50xf32> {ein.name = "X"}, %I: memref<300xi32> {ein.name = "I"}, %Y: memref<300xf32> {ein.name = "Y"}) grid [1, 1, 1] block [6, 1, 1] attributes {egpu.tile_split = #egpu.tile_split<vertices = 7, bytes = 568, points = 300, chunk = 43, written = [2 at 1 * point + 0], read = [1 from [0, 43, 86, 129, 172, 215, 258] to [43, 86, 129, 172, 215, 258, 300]]>} {

// CXX:      poplar::VertexRef v = graph.addVertex(cs0, "gather_Y_{{[0-9a-f]+}}", {{[{][{]}}"X", buffers[0].flatten()}, {"I", buffers[1].flatten().slice(begin, end)}, {"Y", buffers[2].flatten().slice(begin, end)}});

// -----

// 12 points: fewer than 8 per worker of one vertex, so one vertex on tile 0.

func.func @few_points(%X: tensor<12xf32> {ein.name = "X"}) -> tensor<12xf32> {
  %Y = ein.einsum "Y" assign parallel [N = 12] : tensor<12xf32> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<12xf32>
    %y = arith.addf %x, %x : f32
    ein.yield %y : f32
  }
  func.return %Y : tensor<12xf32>
}

// CHECK:      egpu.func @few_points_Y(%X: memref<12xf32> {ein.name = "X"}, %Y: memref<12xf32> {ein.name = "Y"}) grid [1, 1, 1] block [6, 1, 1] attributes {egpu.tile_split = #egpu.tile_split<vertices = 1, bytes = 96>} {

// CXX:      poplar::VertexRef v0 = graph.addVertex(cs0, "few_points_Y_{{[0-9a-f]+}}", {{[{][{]}}"X", buffers[0].flatten()}, {"Y", buffers[1].flatten()}});
// CXX-NEXT: graph.setTileMapping(v0, 0);

// -----

// AntaresIR.md's MatMul (1024 x 512 x 512): a range of points reads B's columns as the hull
// of B's rows (1 MB, over a tile's 624 KiB) however many ranges there are, so the points
// are cut into boxes of 16 x 32 points (C's shape): each vertex reads a box of A (its 16
// rows) and of B (its 32 columns, 512 x 32), the low corner of each per vertex where the box
// is not the whole dimension; it writes its box of C, indexed by the point's place in it.

func.func @matmul(%A: tensor<1024x512xf32> {ein.name = "A"}, %B: tensor<512x512xf32> {ein.name = "B"}) -> tensor<1024x512xf32> {
  %C = ein.einsum "C" add parallel [N = 1024, M = 512] reduce [K = 512] : tensor<1024x512xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<1024x512xf32>
    %b = ein.load %B[%K, %M] : tensor<512x512xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<1024x512xf32>
}

// CHECK:      egpu.func @matmul_C(%A: memref<1024x512xf32> {ein.name = "A"}, %B: memref<512x512xf32> {ein.name = "B"}, %C: memref<1024x512xf32> {ein.name = "C"}) grid [1, 1, 1] block [6, 1, 1] attributes {egpu.tile_split = #egpu.tile_split<vertices = 1024, bytes = 100380, points = 524288, box = [16, 32] in [1024, 512], written = [2 at 1 * point + 0], read = [0 box [16, 512] at [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 16, {{[0-9, ]+}}, 1008], []], 1 box [512, 32] at [[], [0, 32, 64, 96, {{[0-9, ]+}}, 480]]]>} {

// CXX:      for (int einc_q = gid; einc_q < einc_count; einc_q += 6) {
// CXX-NEXT:   int point = einc_first1 + einc_q % einc_size1;
// CXX-NEXT:   int einc_r = einc_q / einc_size1;
// CXX-NEXT:   point += (einc_first0 + einc_r) * 512;
// CXX:          C[einc_q] = C[einc_q] + A[N * 512 + K - einc_base0] * B[K * 32 + M - einc_base1];
// CXX:      for (unsigned tile = 0; tile < 1024; ++tile) {
// CXX-NEXT:   unsigned first0 = tile / 16 * 16, size0 = std::min(16u, 1024u - first0);
// CXX-NEXT:   unsigned first1 = tile % 16 * 32, size1 = std::min(32u, 512u - first1);
// CXX-NEXT:   poplar::VertexRef v = graph.addVertex(cs0, "matmul_C_{{[0-9a-f]+}}", {{[{][{]}}"A", buffers[0].slice({einc_low0_0_0[tile], 0}, {einc_low0_0_0[tile] + 16, 512}).flatten()}, {"B", buffers[1].slice({0, einc_low0_1_1[tile]}, {512, einc_low0_1_1[tile] + 32}).flatten()}, {"C", buffers[2].slice({first0, first1}, {first0 + size0, first1 + size1}).flatten()}});
// CXX-NEXT:   graph.setInitialValue(v["einc_count"], size0 * size1);
// CXX-NEXT:   graph.setInitialValue(v["einc_first0"], first0);
// CXX-NEXT:   graph.setInitialValue(v["einc_size0"], size0);
// CXX-NEXT:   graph.setInitialValue(v["einc_first1"], first1);
// CXX-NEXT:   graph.setInitialValue(v["einc_size1"], size1);
// CXX-NEXT:   graph.setInitialValue(v["einc_base0"], einc_low0_0_0[tile] * 512);
// CXX-NEXT:   graph.setInitialValue(v["einc_base1"], einc_low0_1_1[tile]);
// CXX-NEXT:   graph.setTileMapping(v, tile);
// CXX-NEXT:   graph.setTileMapping(buffers[2].slice({first0, first1}, {first0 + size0, first1 + size1}).flatten(), tile);
