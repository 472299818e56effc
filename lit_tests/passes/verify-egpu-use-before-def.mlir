// RUN: not einc-opt %s -p verify-egpu 2>&1 | filecheck %s

// A value used before its definition in a kernel is a bug of the pass that built the
// kernel: an internal compiler error naming the kernel and the value.

egpu.func @late(%out: memref<f32>) grid [1, 1, 1] block [1, 1, 1] {
  affine.store %late, %out[] : memref<f32>
  %late = arith.constant 1.0 : f32
  egpu.return
}

// CHECK: einc-opt: internal compiler error in stage 'verify-egpu': egpu.func @late: value %late (result 0 of arith.constant) is used by affine.store before its definition
