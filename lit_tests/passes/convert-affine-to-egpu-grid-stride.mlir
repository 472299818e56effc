// RUN: einc-opt %s -p "convert-affine-to-egpu{target=poplar}" | filecheck %s

// A target whose grid is too small for the points (Poplar: one vertex of six workers)
// strides: each work-item takes every 6th point.

func.func @grid_stride(%A: memref<20xf32> {ein.name = "A"}, %B: memref<20xf32> {ein.name = "B", ein.output}) {
  affine.for %N = 0 to 20 {
    %a = affine.load %A[%N] : memref<20xf32>
    affine.store %a, %B[%N] : memref<20xf32>
  }
  func.return
}

// CHECK-LABEL: egpu.func @grid_stride_B(
// CHECK-SAME:      grid [1, 1, 1] block [6, 1, 1] {
// CHECK-NEXT:    %[[G:.*]] = egpu.global_id x
// CHECK-NEXT:    %[[END:.*]] = arith.constant 20 : index
// CHECK-NEXT:    %[[STRIDE:.*]] = arith.constant 6 : index
// CHECK-NEXT:    scf.for %[[N:.*]] = %[[G]] to %[[END]] step %[[STRIDE]] {
// CHECK-NEXT:      %[[X:.*]] = affine.load %{{.*}}[%[[N]]] : memref<20xf32>
// CHECK-NEXT:      affine.store %[[X]], %{{.*}}[%[[N]]] : memref<20xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    egpu.return
