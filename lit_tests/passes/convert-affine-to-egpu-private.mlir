// RUN: einc-opt %s --verify-each -p "convert-affine-to-egpu{target=opencl}" | filecheck %s

// A local copy of a scalar (cache_read "input1" in "local") at a loop that unroll then
// removed: each unrolled iteration's private buffer, its copy and its reader stand at the
// host's top level. They move into a loop of one iteration, so that the buffer is filled
// and read in one kernel (--verify-each: verify-egpu after the pass).

func.func @kernel(%input0: memref<2xf32> {ein.name = "input0"}, %input1: memref<f32> {ein.name = "input1"}, %output0: memref<2xf32> {ein.name = "output0", ein.output}) {
  %0 = arith.constant 0 : index
  %input1_local = memref.alloca() {ein.name = "input1_local", alignment = 64 : i64} : memref<f32>
  %1 = affine.load %input1[] : memref<f32>
  affine.store %1, %input1_local[] : memref<f32>
  %2 = affine.load %input0[%0] : memref<2xf32>
  %3 = affine.load %input1_local[] : memref<f32>
  %4 = arith.mulf %2, %3 : f32
  affine.store %4, %output0[%0] : memref<2xf32>
  %5 = arith.constant 1 : index
  %input1_local_1 = memref.alloca() {ein.name = "input1_local", alignment = 64 : i64} : memref<f32>
  %6 = affine.load %input1[] : memref<f32>
  affine.store %6, %input1_local_1[] : memref<f32>
  %7 = affine.load %input0[%5] : memref<2xf32>
  %8 = affine.load %input1_local_1[] : memref<f32>
  %9 = arith.mulf %7, %8 : f32
  affine.store %9, %output0[%5] : memref<2xf32>
  func.return
}

// CHECK-LABEL: func.func @kernel(
// CHECK-NEXT:    egpu.launch @kernel_output0(%{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NEXT:    egpu.launch @kernel_output0_1(%{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NEXT:    func.return

// CHECK-LABEL: egpu.func @kernel_output0(
// CHECK-SAME:      grid [1, 1, 1] block [1, 1, 1] {
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 1 {
// CHECK-NEXT:      %[[L:.*]] = memref.alloca()
// CHECK-NEXT:      %[[V:.*]] = affine.load %{{.*}}[] : memref<f32>
// CHECK-NEXT:      affine.store %[[V]], %[[L]][] : memref<f32>
// CHECK-NEXT:      %[[X:.*]] = affine.load %{{.*}}[%[[C0]]] : memref<2xf32>
// CHECK-NEXT:      %[[S:.*]] = affine.load %[[L]][] : memref<f32>
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[X]], %[[S]] : f32
// CHECK-NEXT:      affine.store %[[P]], %{{.*}}[%[[C0]]] : memref<2xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    egpu.return

// CHECK-LABEL: egpu.func @kernel_output0_1(
// CHECK:         affine.for %{{.*}} = 0 to 1 {
// CHECK-NEXT:      memref.alloca()
