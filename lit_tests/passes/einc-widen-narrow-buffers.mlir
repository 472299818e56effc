// RUN: einc-opt %s --split-input-file -p "einc-widen-narrow-buffers{target=opencl}" | filecheck %s
// RUN: einc-opt %s --split-input-file -p "einc-widen-narrow-buffers{target=cuda}" | filecheck %s --check-prefix=CUDA

// A float16 register tile (cache_write "output0" in "local", after legalize-f16-for-c) is
// held as float32: the accumulator's load feeds the sum without an extension, the rounded
// sum is stored widened (exactly), the fill's constant is rebuilt in f32, and the copy-out
// narrows the loaded value back (exact) for the float16 output. On every device target.

func.func @register_tile(%a: memref<8x4xf16>, %b: memref<4x8xf16>, %c: memref<8x8xf16>) {
  %acc = memref.alloca() {ein.name = "output0_local"} : memref<8xf16>
  %zero = arith.constant 0.000000e+00 : f16
  affine.for %j = 0 to 8 {
    affine.store %zero, %acc[%j] : memref<8xf16>
  }
  affine.for %k = 0 to 4 {
    affine.for %j = 0 to 8 {
      %x = affine.load %a[0, %k] : memref<8x4xf16>
      %y = affine.load %b[%k, %j] : memref<4x8xf16>
      %xw = arith.extf %x : f16 to f32
      %yw = arith.extf %y : f16 to f32
      %p = arith.mulf %xw, %yw : f32
      %ph = arith.truncf %p : f32 to f16
      %s = affine.load %acc[%j] : memref<8xf16>
      %sw = arith.extf %s : f16 to f32
      %pw = arith.extf %ph : f16 to f32
      %t = arith.addf %sw, %pw : f32
      %th = arith.truncf %t : f32 to f16
      affine.store %th, %acc[%j] : memref<8xf16>
    }
  }
  affine.for %j = 0 to 8 {
    %v = affine.load %acc[%j] : memref<8xf16>
    affine.store %v, %c[0, %j] : memref<8x8xf16>
  }
  func.return
}

// CHECK-LABEL: func.func @register_tile(
// CHECK-NEXT:    %[[ACC:.*]] = memref.alloca() {ein.name = "output0_local"} : memref<8xf32>
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 8 {
// CHECK-NEXT:      affine.store %[[Z]], %[[ACC]][%{{.*}}] : memref<8xf32>
// CHECK:           %[[PH:.*]] = arith.truncf %{{.*}} : f32 to f16
// CHECK-NEXT:      %[[S:.*]] = affine.load %[[ACC]][%{{.*}}] : memref<8xf32>
// CHECK-NEXT:      %[[PW:.*]] = arith.extf %[[PH]] : f16 to f32
// CHECK-NEXT:      %[[T:.*]] = arith.addf %[[S]], %[[PW]] : f32
// CHECK-NEXT:      %[[TH:.*]] = arith.truncf %[[T]] : f32 to f16
// CHECK-NEXT:      %[[TW:.*]] = arith.extf %[[TH]] : f16 to f32
// CHECK-NEXT:      affine.store %[[TW]], %[[ACC]][%{{.*}}] : memref<8xf32>
// CHECK:           %[[V:.*]] = affine.load %[[ACC]][%{{.*}}] : memref<8xf32>
// CHECK-NEXT:      %[[VH:.*]] = arith.truncf %[[V]] : f32 to f16
// CHECK-NEXT:      affine.store %[[VH]], %{{.*}}[0, %{{.*}}] : memref<8x8xf16>

// CUDA-LABEL: func.func @register_tile(
// CUDA:         memref.alloca() {ein.name = "output0_local"} : memref<8xf32>

// -----

// A bfloat16 tile staged in shared memory: float32 on OpenCL (no 16-bit shared arrays), its
// copy-in widened; CUDA keeps its 16 bits (copied as they are, read by tensor cores).

func.func @shared_tile(%a: memref<16x16xbf16>, %c: memref<16xf32>) {
  %tile = memref.alloca() {ein.name = "input0_shared", einc.memory = "shared"} : memref<16x16xbf16>
  affine.for %i = 0 to 16 {
    affine.for %j = 0 to 16 {
      %x = affine.load %a[%i, %j] : memref<16x16xbf16>
      affine.store %x, %tile[%i, %j] : memref<16x16xbf16>
    }
  }
  affine.for %i = 0 to 16 {
    %x = affine.load %tile[%i, %i] : memref<16x16xbf16>
    %w = arith.extf %x : bf16 to f32
    affine.store %w, %c[%i] : memref<16xf32>
  }
  func.return
}

// CHECK-LABEL: func.func @shared_tile(
// CHECK:         %[[T:.*]] = memref.alloca() {ein.name = "input0_shared", einc.memory = "shared"} : memref<16x16xf32>
// CHECK:           %[[X:.*]] = affine.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<16x16xbf16>
// CHECK-NEXT:      %[[XW:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NEXT:      affine.store %[[XW]], %[[T]][%{{.*}}, %{{.*}}] : memref<16x16xf32>
// CHECK:         %[[Y:.*]] = affine.load %[[T]][%{{.*}}, %{{.*}}] : memref<16x16xf32>
// CHECK-NEXT:    affine.store %[[Y]], %{{.*}}[%{{.*}}] : memref<16xf32>

// CUDA-LABEL: func.func @shared_tile(
// CUDA:         memref.alloca() {ein.name = "input0_shared", einc.memory = "shared"} : memref<16x16xbf16>
