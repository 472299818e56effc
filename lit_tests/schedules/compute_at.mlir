// RUN: einc-opt %s --split-input-file -p convert-ein-to-affine,einc-apply-schedule | filecheck %s

// The producer's row is computed at the start of each iteration of the consumer's row loop
// into a local buffer; its loop over N is dropped (box extent 1) and the original goes.

// CHECK-LABEL: func.func @compute_at_row_producer(
// CHECK-NOT:     memref.alloc()
// CHECK:         affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "T_local"{{.*}}, alignment = 64 : i64} : memref<1x8xf32>
// CHECK-NEXT:      affine.for %[[C:.*]] = 0 to 8 {
// CHECK-NEXT:        %[[A:.*]] = affine.load %A[%[[N]], %[[C]]]
// CHECK:             affine.store %{{.*}}, %[[L]][0, %[[C]]]
// CHECK-NEXT:      } {einc.stmt = "T", einc.axis = "C"}
// CHECK-NEXT:      affine.for %[[C1:.*]] = 0 to 8 {
// CHECK-NEXT:        affine.load %[[L]][0, %[[C1]]]
// CHECK:           } {einc.stmt = "B", einc.axis = "C"}
// CHECK-NEXT:    } {einc.stmt = "B", einc.axis = "N"}
// CHECK-NEXT:    func.return
func.func @compute_at_row_producer(%A: tensor<4x8xf32> {ein.name = "A"}) -> tensor<4x8xf32> {
  %T = ein.einsum "T" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N: index, %C: index):
    %0 = ein.load %A[%N, %C] : tensor<4x8xf32>
    %1 = arith.constant 2.000000e+00 : f32
    %2 = arith.mulf %0, %1 : f32
    ein.yield %2 : f32
  }
  %B = ein.einsum "B" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %C_1: index):
    %3 = ein.load %T[%N_1, %C_1] : tensor<4x8xf32>
    %4 = ein.load %A[%N_1, %C_1] : tensor<4x8xf32>
    %5 = arith.addf %3, %4 : f32
    ein.yield %5 : f32
  }
  func.return %B : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "B" axis "N" in %root
  %t = transform.einc.match stmt "T" in %root
  transform.einc.compute_at %t at %n
  transform.yield
}

// -----

// A 3x3 stencil's producer computed per output row: a 3-row box, so the two halo rows
// are recomputed by the next iteration.

// CHECK-LABEL: func.func @compute_at_stencil_recomputes_halo(
// CHECK:         } {einc.stmt = "B", einc.axis = "HO", einc.init}
// CHECK-NEXT:    affine.for %[[HO:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "T_local"{{.*}}, alignment = 64 : i64} : memref<3x6xf32>
// CHECK-NEXT:      affine.for %[[H:.*]] = 0 to 3 {
// CHECK-NEXT:        affine.for %[[W:.*]] = 0 to 6 {
// CHECK-NEXT:          affine.load %A[%[[HO]] + %[[H]], %[[W]]]
// CHECK:               affine.store %{{.*}}, %[[L]][%[[H]], %[[W]]]
// CHECK:           affine.for %[[WO:.*]] = 0 to 4 {
// CHECK-NEXT:        affine.for %[[KH:.*]] = 0 to 3 {
// CHECK-NEXT:          affine.for %[[KW:.*]] = 0 to 3 {
// CHECK-NEXT:            affine.load %[[L]][%[[KH]], %[[WO]] + %[[KW]]] : memref<3x6xf32>
// CHECK:         } {einc.stmt = "B", einc.axis = "HO"}
// CHECK-NOT:     %T
func.func @compute_at_stencil_recomputes_halo(%A: tensor<6x6xf32> {ein.name = "A"}) -> tensor<4x4xf32> {
  %T = ein.einsum "T" assign parallel [H = 6, W = 6] : tensor<6x6xf32> {
  ^bb0(%H: index, %W: index):
    %0 = ein.load %A[%H, %W] : tensor<6x6xf32>
    %1 = arith.constant 2.000000e+00 : f32
    %2 = arith.mulf %0, %1 : f32
    ein.yield %2 : f32
  }
  %B = ein.einsum "B" add parallel [HO = 4, WO = 4] reduce [KH = 3, KW = 3] : tensor<4x4xf32> {
  ^bb0(%HO: index, %WO: index, %KH: index, %KW: index):
    %3 = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%HO, %KH)
    %4 = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%WO, %KW)
    %5 = ein.load %T[%3, %4] : tensor<6x6xf32>
    ein.yield %5 : f32
  }
  func.return %B : tensor<4x4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %ho = transform.einc.match stmt "B" axis "HO" in %root
  %t = transform.einc.match stmt "T" in %root
  transform.einc.compute_at %t at %ho
  transform.yield
}

// -----

// A reduction producer (max over C) with its identity fill: per row, the fill becomes one
// store to the local element and the reduction loop is kept whole.

// CHECK-LABEL: func.func @compute_at_fill_and_reduction(
// CHECK:         %[[INF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "T_local"{{.*}}, alignment = 64 : i64} : memref<1xf32>
// CHECK-NEXT:      affine.store %[[INF]], %[[L]][0] : memref<1xf32>
// CHECK-NEXT:      affine.for %[[C:.*]] = 0 to 8 {
// CHECK-NEXT:        affine.load %A[%[[N]], %[[C]]]
// CHECK-NEXT:        affine.load %[[L]][0]
// CHECK-NEXT:        arith.maximumf
// CHECK-NEXT:        affine.store %{{.*}}, %[[L]][0]
// CHECK-NEXT:      } {einc.stmt = "T", einc.axis = "C"}
// CHECK-NEXT:      affine.for
// CHECK-NEXT:        affine.load %A
// CHECK-NEXT:        affine.load %[[L]][0]
// CHECK:         } {einc.stmt = "B", einc.axis = "N"}
// CHECK-NEXT:    func.return
func.func @compute_at_fill_and_reduction(%A: tensor<4x8xf32> {ein.name = "A"}) -> tensor<4x8xf32> {
  %T = ein.einsum "T" max parallel [N = 4] reduce [C = 8] : tensor<4xf32> {
  ^bb0(%N: index, %C: index):
    %0 = ein.load %A[%N, %C] : tensor<4x8xf32>
    ein.yield %0 : f32
  }
  %B = ein.einsum "B" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %C_1: index):
    %1 = ein.load %A[%N_1, %C_1] : tensor<4x8xf32>
    %2 = ein.load %T[%N_1] : tensor<4xf32>
    %3 = arith.subf %1, %2 : f32
    ein.yield %3 : f32
  }
  func.return %B : tensor<4x8xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "B" axis "N" in %root
  %t = transform.einc.match stmt "T" in %root
  transform.einc.compute_at %t at %n
  transform.yield
}

// -----

// Another nest still reads T: the producer is copied into the loop and also kept.

// CHECK-LABEL: func.func @compute_at_keeps_a_producer_read_elsewhere(
// CHECK:         %[[T:.*]] = memref.alloc() {ein.name = "T"}
// CHECK:         } {einc.stmt = "T", einc.axis = "N", einc.init}
// CHECK:         } {einc.stmt = "T", einc.axis = "N"}
// CHECK-NEXT:    affine.for
// CHECK-NEXT:      memref.alloca() {ein.name = "T_local"
// CHECK:         } {einc.stmt = "B", einc.axis = "N"}
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.load %[[T]][%[[N]]]
// CHECK:         memref.dealloc %[[T]]
func.func @compute_at_keeps_a_producer_read_elsewhere(%A: tensor<4x8xf32> {ein.name = "A"}) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %T = ein.einsum "T" max parallel [N = 4] reduce [C = 8] : tensor<4xf32> {
  ^bb0(%N: index, %C: index):
    %0 = ein.load %A[%N, %C] : tensor<4x8xf32>
    ein.yield %0 : f32
  }
  %B = ein.einsum "B" assign parallel [N = 4, C = 8] : tensor<4x8xf32> {
  ^bb0(%N_1: index, %C_1: index):
    %1 = ein.load %A[%N_1, %C_1] : tensor<4x8xf32>
    %2 = ein.load %T[%N_1] : tensor<4xf32>
    %3 = arith.subf %1, %2 : f32
    ein.yield %3 : f32
  }
  %D = ein.einsum "D" assign parallel [N = 4] : tensor<4xf32> {
  ^bb0(%N_2: index):
    %4 = ein.load %T[%N_2] : tensor<4xf32>
    ein.yield %4 : f32
  }
  func.return %B, %D : tensor<4x8xf32>, tensor<4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "B" axis "N" in %root
  %t = transform.einc.match stmt "T" in %root
  transform.einc.compute_at %t at %n
  transform.yield
}

// -----

// A rank-0 producer (its fill a bare store) is moved into the loop whole.

// CHECK-LABEL: func.func @compute_at_rank0_producer(
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca() {ein.name = "S_local"{{.*}}, alignment = 64 : i64} : memref<f32>
// CHECK-NEXT:      affine.store %[[ZERO]], %[[L]][] : memref<f32>
// CHECK-NEXT:      affine.for %{{.*}} = 0 to 4 {
// CHECK-NEXT:        affine.for %{{.*}} = 0 to 8 {
// CHECK:           } {einc.stmt = "S", einc.axis = "N"}
// CHECK-NEXT:      affine.load %A[%[[N]], 0]
// CHECK-NEXT:      affine.load %[[L]][]
// CHECK:         } {einc.stmt = "B", einc.axis = "N"}
// CHECK-NEXT:    func.return
func.func @compute_at_rank0_producer(%A: tensor<4x8xf32> {ein.name = "A"}) -> tensor<4xf32> {
  %S = ein.einsum "S" add parallel [] reduce [N = 4, C = 8] : tensor<f32> {
  ^bb0(%N: index, %C: index):
    %0 = ein.load %A[%N, %C] : tensor<4x8xf32>
    ein.yield %0 : f32
  }
  %B = ein.einsum "B" assign parallel [N = 4] : tensor<4xf32> {
  ^bb0(%N_1: index):
    %c0 = arith.constant 0 : index
    %1 = ein.load %A[%N_1, %c0] : tensor<4x8xf32>
    %2 = ein.load %S[] : tensor<f32>
    %3 = arith.subf %1, %2 : f32
    ein.yield %3 : f32
  }
  func.return %B : tensor<4xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "B" axis "N" in %root
  %s = transform.einc.match stmt "S" in %root
  transform.einc.compute_at %s at %n
  transform.yield
}
