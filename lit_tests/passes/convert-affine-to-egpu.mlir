// RUN: einc-opt %s --split-input-file -p "convert-affine-to-egpu{target=opencl block=64}" | filecheck %s

// The parallel loops of a statement are flattened onto the global index x; each point's
// coordinates are its row-major digits. 8 x 16 points in blocks of 64: no bounds check.

func.func @elementwise_flattened(%A: memref<8x16xf32> {ein.name = "A"}, %B: memref<8x16xf32> {ein.name = "B", ein.output}) {
  affine.for %N = 0 to 8 {
    affine.for %C = 0 to 16 {
      %a = affine.load %A[%N, %C] : memref<8x16xf32>
      %b = arith.addf %a, %a : f32
      affine.store %b, %B[%N, %C] : memref<8x16xf32>
    }
  }
  func.return
}

// CHECK-LABEL: func.func @elementwise_flattened(
// CHECK-NEXT:    egpu.launch @elementwise_flattened_B(%{{.*}}, %{{.*}}) : memref<8x16xf32>, memref<8x16xf32>
// CHECK-NEXT:    func.return
// CHECK:       egpu.func @elementwise_flattened_B(%[[A:.*]]: memref<8x16xf32> {ein.name = "A"}, %[[B:.*]]: memref<8x16xf32> {ein.name = "B"}) grid [2, 1, 1] block [64, 1, 1] {
// CHECK-NEXT:    %[[G:.*]] = egpu.global_id x
// CHECK-NEXT:    %[[N:.*]] = affine.apply affine_map<(d0) -> ((d0 floordiv 16))> (%[[G]])
// CHECK-NEXT:    %[[C:.*]] = affine.apply affine_map<(d0) -> ((d0 mod 16))> (%[[G]])
// CHECK-NEXT:    %[[X:.*]] = affine.load %[[A]][%[[N]], %[[C]]] : memref<8x16xf32>
// CHECK-NEXT:    %[[Y:.*]] = arith.addf %[[X]], %[[X]] : f32
// CHECK-NEXT:    affine.store %[[Y]], %[[B]][%[[N]], %[[C]]] : memref<8x16xf32>
// CHECK-NEXT:    egpu.return
// -----

// The last block overshoots 100 points: work-items past the end do nothing.

func.func @bounds_checked(%A: memref<100xf32> {ein.name = "A"}, %B: memref<100xf32> {ein.name = "B", ein.output}) {
  affine.for %N = 0 to 100 {
    %a = affine.load %A[%N] : memref<100xf32>
    affine.store %a, %B[%N] : memref<100xf32>
  }
  func.return
}

// CHECK-LABEL: egpu.func @bounds_checked_B(
// CHECK-SAME:      grid [2, 1, 1] block [64, 1, 1] {
// CHECK-NEXT:    %[[N:.*]] = egpu.global_id x
// CHECK-NEXT:    %[[END:.*]] = arith.constant 100 : index
// CHECK-NEXT:    %[[IN:.*]] = arith.cmpi slt, %[[N]], %[[END]] : index
// CHECK-NEXT:    scf.if %[[IN]] {
// CHECK-NEXT:      %[[X:.*]] = affine.load %{{.*}}[%[[N]]] : memref<100xf32>
// CHECK-NEXT:      affine.store %[[X]], %{{.*}}[%[[N]]] : memref<100xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    egpu.return
// -----

// A reduction: the identity fill joins the reduction's kernel; each work-item fills its
// element, then accumulates over the reduction loop, which stays sequential.

func.func @reduction_with_fill(%A: memref<4x32xf32> {ein.name = "A"}, %S: memref<4xf32> {ein.name = "S", ein.output}) {
  %zero = arith.constant 0.0 : f32
  affine.for %N = 0 to 4 {
    affine.store %zero, %S[%N] : memref<4xf32>
  }
  affine.for %N = 0 to 4 {
    affine.for %K = 0 to 32 {
      %a = affine.load %A[%N, %K] : memref<4x32xf32>
      %s = affine.load %S[%N] : memref<4xf32>
      %t = arith.addf %s, %a : f32
      affine.store %t, %S[%N] : memref<4xf32>
    }
  }
  func.return
}

// CHECK-LABEL: func.func @reduction_with_fill(
// CHECK-NEXT:    egpu.launch @reduction_with_fill_S(%{{.*}}, %{{.*}}) : memref<4x32xf32>, memref<4xf32>
// CHECK-NEXT:    func.return
// CHECK:       egpu.func @reduction_with_fill_S(%[[A:.*]]: memref<4x32xf32> {ein.name = "A"}, %[[S:.*]]: memref<4xf32> {ein.name = "S"}) grid [1, 1, 1] block [4, 1, 1] {
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[N:.*]] = egpu.global_id x
// CHECK-NEXT:    affine.store %[[ZERO]], %[[S]][%[[N]]] : memref<4xf32>
// CHECK-NEXT:    affine.for %[[K:.*]] = 0 to 32 {
// CHECK-NEXT:      %[[X:.*]] = affine.load %[[A]][%[[N]], %[[K]]] : memref<4x32xf32>
// CHECK-NEXT:      %[[ACC:.*]] = affine.load %[[S]][%[[N]]] : memref<4xf32>
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[X]] : f32
// CHECK-NEXT:      affine.store %[[SUM]], %[[S]][%[[N]]] : memref<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    egpu.return
// -----

// Intermediates stay host allocations, passed to the kernels that write and read them.

func.func @temp_between_kernels(%A: memref<16xf32> {ein.name = "A"}, %B: memref<16xf32> {ein.name = "B", ein.output}) {
  %T = memref.alloc() {ein.name = "T"} : memref<16xf32>
  affine.for %N = 0 to 16 {
    %a = affine.load %A[%N] : memref<16xf32>
    affine.store %a, %T[%N] : memref<16xf32>
  }
  affine.for %N = 0 to 16 {
    %t = affine.load %T[%N] : memref<16xf32>
    affine.store %t, %B[%N] : memref<16xf32>
  }
  memref.dealloc %T : memref<16xf32>
  func.return
}

// CHECK-LABEL: func.func @temp_between_kernels(
// CHECK-SAME:      %[[A:.*]]: memref<16xf32> {ein.name = "A"}, %[[B:.*]]: memref<16xf32> {ein.name = "B", ein.output}) {
// CHECK-NEXT:    %[[T:.*]] = memref.alloc() {ein.name = "T"} : memref<16xf32>
// CHECK-NEXT:    egpu.launch @temp_between_kernels_T(%[[A]], %[[T]]) : memref<16xf32>, memref<16xf32>
// CHECK-NEXT:    egpu.launch @temp_between_kernels_B(%[[B]], %[[T]]) : memref<16xf32>, memref<16xf32>
// CHECK-NEXT:    memref.dealloc %[[T]] : memref<16xf32>
// CHECK-NEXT:    func.return
// CHECK:       egpu.func @temp_between_kernels_T(
// CHECK:       egpu.func @temp_between_kernels_B(
// -----

// A rank-0 statement is one work-item.

func.func @scalar_statement(%A: memref<f32> {ein.name = "A"}, %B: memref<f32> {ein.name = "B", ein.output}) {
  %a = affine.load %A[] : memref<f32>
  %b = arith.mulf %a, %a : f32
  affine.store %b, %B[] : memref<f32>
  func.return
}

// CHECK-LABEL: func.func @scalar_statement(
// CHECK-NEXT:    egpu.launch @scalar_statement_B(%{{.*}}, %{{.*}}) : memref<f32>, memref<f32>
// CHECK-NEXT:    func.return
// CHECK:       egpu.func @scalar_statement_B(%[[A:.*]]: memref<f32> {ein.name = "A"}, %[[B:.*]]: memref<f32> {ein.name = "B"}) grid [1, 1, 1] block [1, 1, 1] {
// CHECK-NEXT:    %[[X:.*]] = affine.load %[[A]][] : memref<f32>
// CHECK-NEXT:    %[[Y:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK-NEXT:    affine.store %[[Y]], %[[B]][] : memref<f32>
// CHECK-NEXT:    egpu.return
// -----

// Loops a schedule bound to work-item coordinates map directly; a partial tile checks its
// upper bound in the kernel.

func.func @bound_loops(%A: memref<100xf32> {ein.name = "A"}, %B: memref<100xf32> {ein.name = "B", ein.output}) {
  affine.for %i_o = 0 to 100 step 32 {
    affine.for %i_i = 0 to min affine_map<(d0) -> (32, -d0 + 100)>(%i_o) {
      %i = affine.apply affine_map<(d0, d1) -> (d0 + d1)>(%i_o, %i_i)
      %a = affine.load %A[%i] : memref<100xf32>
      affine.store %a, %B[%i] : memref<100xf32>
    } {einc.bind = "thread.x"}
  } {einc.bind = "block.x"}
  func.return
}

// CHECK-LABEL: egpu.func @bound_loops_B(
// CHECK-SAME:      grid [4, 1, 1] block [32, 1, 1] {
// CHECK-NEXT:    %[[BX:.*]] = egpu.block_id x
// CHECK-NEXT:    %[[IO:.*]] = affine.apply affine_map<(d0) -> ((d0 * 32))> (%[[BX]])
// CHECK-NEXT:    %[[TX:.*]] = egpu.thread_id x
// CHECK-NEXT:    %[[UB:.*]] = affine.min affine_map<(d0) -> (32, ((d0 * -1) + 100))> (%[[IO]])
// CHECK-NEXT:    %[[IN:.*]] = arith.cmpi slt, %[[TX]], %[[UB]] : index
// CHECK-NEXT:    scf.if %[[IN]] {
// CHECK-NEXT:      %[[I:.*]] = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%[[IO]], %[[TX]])
// CHECK-NEXT:      %[[X:.*]] = affine.load %{{.*}}[%[[I]]] : memref<100xf32>
// CHECK-NEXT:      affine.store %[[X]], %{{.*}}[%[[I]]] : memref<100xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    egpu.return

