// RUN: einc-opt %s --split-input-file -t c | filecheck %s

// Schedule marks print as OpenMP pragmas, the outermost kept where OpenMP cannot nest them
// (every mark is a licence: the loop is correct sequential too).

// A parallelized copy loop (cache_read) inside a vectorized loop: nothing but `simd` may be
// nested in a `simd` region, and no `simd` in `simd` before OpenMP 5.0, so it prints no
// pragma.

func.func @parallel_in_simd(%x: memref<13xf32> {ein.name = "x"}, %y: memref<13xf32> {ein.name = "y", ein.output}) {
  affine.for %n = 0 to 13 {
    %l = memref.alloca() {ein.name = "x_local", alignment = 64 : i64} : memref<1xf32>
    affine.for %c = 0 to 1 {
      %v = affine.load %x[%n + %c] : memref<13xf32>
      affine.store %v, %l[%c] : memref<1xf32>
    } {einc.copy, einc.vectorize, einc.parallel}
    %w = affine.load %l[0] : memref<1xf32>
    affine.store %w, %y[%n] : memref<13xf32>
  } {einc.vectorize}
  func.return
}

// CHECK-LABEL: void parallel_in_simd(
// CHECK-NEXT:   #pragma omp simd
// CHECK-NEXT:   for (int64_t n = 0; n < 13; n++) {
// CHECK-NEXT:     float x_local[1] __attribute__((aligned(64)));
// CHECK-NEXT:     for (int64_t c = 0; c < 1; c++) {
// CHECK-NEXT:       x_local[c] = x[n + c];
// CHECK-NEXT:     }
// CHECK-NEXT:     y[n] = x_local[0];
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Inside `parallel for simd` neither mark of the inner loop prints.

func.func @parallel_simd_in_parallel_simd(%x: memref<4x8xf32> {ein.name = "x"}, %y: memref<4x8xf32> {ein.name = "y", ein.output}) {
  affine.for %n = 0 to 4 {
    affine.for %m = 0 to 8 {
      %v = affine.load %x[%n, %m] : memref<4x8xf32>
      affine.store %v, %y[%n, %m] : memref<4x8xf32>
    } {einc.vectorize, einc.parallel}
  } {einc.vectorize, einc.parallel}
  func.return
}

// CHECK-LABEL: void parallel_simd_in_parallel_simd(
// CHECK-NEXT:   #pragma omp parallel for simd
// CHECK-NEXT:   for (int64_t n = 0; n < 4; n++) {
// CHECK-NEXT:     for (int64_t m = 0; m < 8; m++) {
// CHECK-NEXT:       y[n * 8 + m] = x[n * 8 + m];
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Inside a `parallel for` the team exists: an inner parallel loop prints no `parallel`
// (one that is also vectorized keeps `simd`), through sequential loops in between too; a
// parallel loop after the nest forks its own team.

func.func @parallel_in_parallel(%x: memref<4x2x8xf32> {ein.name = "x"}, %y: memref<4x2x8xf32> {ein.name = "y", ein.output}, %z: memref<4xf32> {ein.name = "z", ein.output}) {
  affine.for %n = 0 to 4 {
    affine.for %k = 0 to 2 {
      affine.for %m = 0 to 8 {
        %v = affine.load %x[%n, %k, %m] : memref<4x2x8xf32>
        affine.store %v, %y[%n, %k, %m] : memref<4x2x8xf32>
      } {einc.parallel}
      affine.for %m = 0 to 8 {
        %v = affine.load %x[%n, %k, %m] : memref<4x2x8xf32>
        affine.store %v, %y[%n, %k, %m] : memref<4x2x8xf32>
      } {einc.parallel, einc.vectorize}
    }
  } {einc.parallel}
  affine.for %n = 0 to 4 {
    %v = affine.load %x[%n, 0, 0] : memref<4x2x8xf32>
    affine.store %v, %z[%n] : memref<4xf32>
  } {einc.parallel}
  func.return
}

// The body of a loop printed `parallel for` is a static inline function taking the buffers
// as restrict pointers (OpenMP's outlining of the body would lose the restrict).

// CHECK-LABEL: static inline void einc_parallel_0(int64_t n, const float* restrict x, float* restrict y) {
// CHECK-NEXT:   for (int64_t k = 0; k < 2; k++) {
// CHECK-NEXT:     for (int64_t m = 0; m < 8; m++) {
// CHECK-NEXT:       y[n * 16 + k * 8 + m] = x[n * 16 + k * 8 + m];
// CHECK-NEXT:     }
// CHECK-NEXT:     #pragma omp simd
// CHECK-NEXT:     for (int64_t m = 0; m < 8; m++) {
// CHECK-NEXT:       y[n * 16 + k * 8 + m] = x[n * 16 + k * 8 + m];
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: static inline void einc_parallel_1(int64_t n, const float* restrict x, float* restrict z) {
// CHECK-NEXT:   z[n] = x[n * 16];
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: void parallel_in_parallel(const float* restrict x, float* restrict y, float* restrict z) {
// CHECK-NEXT:   #pragma omp parallel for
// CHECK-NEXT:   for (int64_t n = 0; n < 4; n++) {
// CHECK-NEXT:     einc_parallel_0(n, x, y);
// CHECK-NEXT:   }
// CHECK-NEXT:   #pragma omp parallel for
// CHECK-NEXT:   for (int64_t n = 0; n < 4; n++) {
// CHECK-NEXT:     einc_parallel_1(n, x, z);
// CHECK-NEXT:   }
// CHECK-NEXT: }
