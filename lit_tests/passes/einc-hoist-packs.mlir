// RUN: einc-opt %s --split-input-file -p einc-hoist-packs | filecheck %s

// Y[n, f, x] = sum_c W[f, c] * X[n, c, x], the batch loop parallel, W's 4 x 256 tile staged per
// filter tile f_o inside it (once per image). The pass packs both tiles once, above the batch
// loop, into a heap buffer of 8 x 256 (the tile of f_o at row f_o: 4 rows per 4 filters), freed at
// the end.

// CHECK-LABEL: func.func @kernel(
// CHECK:         %[[P:.*]] = memref.alloc() {ein.name = "W_local_pack"} : memref<8x256xf32>
// CHECK-NEXT:    affine.for %[[FO:.*]] = 0 to 8 step 4 {
// CHECK-NEXT:      affine.for %[[C0:.*]] = 0 to 4 {
// CHECK-NEXT:        affine.for %[[C1:.*]] = 0 to 256 {
// CHECK-NEXT:          %[[V:.*]] = affine.load %{{.*}}[%[[FO]] + %[[C0]], %[[C1]]] : memref<8x256xf32>
// CHECK-NEXT:          affine.store %[[V]], %[[P]][%[[FO]] + %[[C0]], %[[C1]]] : memref<8x256xf32>
// CHECK:         affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[FO2:.*]] = 0 to 8 step 4 {
// CHECK-NOT:         memref.alloca
// CHECK:               affine.load %[[P]][%[[FO2]] + %{{.*}}, %{{.*}}] : memref<8x256xf32>
// CHECK:         } {einc.stmt = "Y", einc.axis = "N", einc.parallel}
// CHECK-NEXT:    memref.dealloc %[[P]] : memref<8x256xf32>
// CHECK-NEXT:    func.return

builtin.module {
  func.func @kernel(%W: memref<8x256xf32> {ein.name = "W"}, %X: memref<4x256x5xf32> {ein.name = "X"}, %Y: memref<4x8x5xf32> {ein.name = "Y", ein.output}) {
    affine.for %n = 0 to 4 {
      affine.for %f_o = 0 to 8 step 4 {
        %W_local = memref.alloca() {ein.name = "W_local", alignment = 64 : i64} : memref<4x256xf32>
        affine.for %c0 = 0 to 4 {
          affine.for %c1 = 0 to 256 {
            %0 = affine.load %W[%f_o + %c0, %c1] : memref<8x256xf32>
            affine.store %0, %W_local[%c0, %c1] : memref<4x256xf32>
          } {einc.stmt = "Y", einc.axis = "W.in1", einc.copy}
        } {einc.stmt = "Y", einc.axis = "W.in0", einc.copy}
        affine.for %f_i = 0 to 4 {
          affine.for %x = 0 to 5 {
            affine.for %c = 0 to 256 {
              %1 = affine.load %W_local[%f_i, %c] : memref<4x256xf32>
              %2 = affine.load %X[%n, %c, %x] : memref<4x256x5xf32>
              %3 = arith.mulf %1, %2 : f32
              %4 = affine.load %Y[%n, %f_o + %f_i, %x] : memref<4x8x5xf32>
              %5 = arith.addf %4, %3 : f32
              affine.store %5, %Y[%n, %f_o + %f_i, %x] : memref<4x8x5xf32>
            } {einc.stmt = "Y", einc.axis = "C"}
          } {einc.stmt = "Y", einc.axis = "X"}
        } {einc.stmt = "Y", einc.axis = "F.i"}
      } {einc.stmt = "Y", einc.axis = "F.o"}
    } {einc.stmt = "Y", einc.axis = "N", einc.parallel}
    func.return
  }
}

// -----

// The staged tile depends on the parallel loop (X's row of image n): it stays packed per
// iteration.

// CHECK-LABEL: func.func @per_image(
// CHECK-NOT:     memref.alloc()
// CHECK:         affine.for %{{.*}} = 0 to 4 {
// CHECK-NEXT:      %{{.*}} = memref.alloca()

builtin.module {
  func.func @per_image(%X: memref<4x1024xf32> {ein.name = "X"}, %Y: memref<4x1024xf32> {ein.name = "Y", ein.output}) {
    affine.for %n = 0 to 4 {
      %X_local = memref.alloca() {ein.name = "X_local", alignment = 64 : i64} : memref<1024xf32>
      affine.for %c0 = 0 to 1024 {
        %0 = affine.load %X[%n, %c0] : memref<4x1024xf32>
        affine.store %0, %X_local[%c0] : memref<1024xf32>
      } {einc.stmt = "Y", einc.axis = "X.in0", einc.copy}
      affine.for %c = 0 to 1024 {
        %1 = affine.load %X_local[%c] : memref<1024xf32>
        affine.store %1, %Y[%n, %c] : memref<4x1024xf32>
      } {einc.stmt = "Y", einc.axis = "C"}
    } {einc.stmt = "Y", einc.axis = "N", einc.parallel}
    func.return
  }
}

// -----

// The staged tensor is written in the function (an in-place update of W): the copy-in could
// read another image's writes, so the tile stays per iteration.

// CHECK-LABEL: func.func @written(
// CHECK-NOT:     memref.alloc()
// CHECK:         memref.alloca()

builtin.module {
  func.func @written(%W: memref<1024xf32> {ein.name = "W", ein.output}, %Y: memref<4x1024xf32> {ein.name = "Y", ein.output}) {
    affine.for %n = 0 to 4 {
      %W_local = memref.alloca() {ein.name = "W_local", alignment = 64 : i64} : memref<1024xf32>
      affine.for %c0 = 0 to 1024 {
        %0 = affine.load %W[%c0] : memref<1024xf32>
        affine.store %0, %W_local[%c0] : memref<1024xf32>
      } {einc.stmt = "Y", einc.axis = "W.in0", einc.copy}
      affine.for %c = 0 to 1024 {
        %1 = affine.load %W_local[%c] : memref<1024xf32>
        affine.store %1, %Y[%n, %c] : memref<4x1024xf32>
        affine.store %1, %W[%c] : memref<1024xf32>
      } {einc.stmt = "Y", einc.axis = "C"}
    } {einc.stmt = "Y", einc.axis = "N", einc.parallel}
    func.return
  }
}
