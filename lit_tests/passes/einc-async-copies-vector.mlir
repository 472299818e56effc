// RUN: einc-opt %s -p 'einc-async-copies{target=cuda}' | filecheck %s

// A vector pair of einc-vectorize-global (an aligned 16-byte load of a kernel argument whose
// only use is an aligned store into a shared tile, in a copy loop) becomes one 16-byte copy
// (`lanes 4`); a pair whose store is not marked aligned stays as it is.

// CHECK-LABEL: egpu.func @vector_copy(
// CHECK:         scf.for
// CHECK-NEXT:      %[[E:.*]] = affine.apply
// CHECK-NEXT:      egpu.copy_async %{{.*}}[%[[E]]] to %{{.*}}[%[[E]]] lanes 4 {egpu.align = 16 : i64} : memref<1024xf32>, memref<256xf32>
// CHECK-NEXT:      %[[X:.*]] = egpu.vload
// CHECK-NEXT:      egpu.vstore %[[X]]
// CHECK:         egpu.async_wait
// CHECK-NEXT:    egpu.barrier
builtin.module {
  egpu.func @vector_copy(%A: memref<1024xf32> {ein.name = "A"}) grid [4, 1, 1] block [64, 1, 1] {
    %sh = egpu.alloc_shared : memref<256xf32>
    %sh2 = egpu.alloc_shared : memref<256xf32>
    %tid = egpu.thread_id x
    %n = arith.constant 64 : index
    %t = arith.constant 64 : index
    scf.for %v = %tid to %n step %t {
      %e = affine.apply affine_map<(d0) -> ((d0 * 4))> (%v)
      %x = egpu.vload %A[%e] {egpu.align = 16 : i64} : memref<1024xf32> -> vector<4xf32>
      egpu.vstore %x, %sh[%e] {egpu.align = 16 : i64} : vector<4xf32>, memref<256xf32>
      %y = egpu.vload %A[%e] {egpu.align = 16 : i64} : memref<1024xf32> -> vector<4xf32>
      egpu.vstore %y, %sh2[%e] : vector<4xf32>, memref<256xf32>
    }
    egpu.barrier
    egpu.return
  }
}
