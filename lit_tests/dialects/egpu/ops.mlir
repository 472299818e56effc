// RUN: einc-opt %s --split-input-file | filecheck %s
// RUN: einc-opt %s --split-input-file | einc-opt --split-input-file | filecheck %s

// A host function launching a kernel: launch shape and buffer arguments.

// CHECK-LABEL: func.func @host
// CHECK:         egpu.launch @kernel_y(%{{.*}}, %{{.*}}) : memref<64x16xf32>, memref<64xf32>
// CHECK:       egpu.func @kernel_y(%[[X:.*]]: memref<64x16xf32> {ein.name = "x"}, %[[Y:.*]]: memref<64xf32>) grid [1, 1, 1] block [64, 1, 1] {
// CHECK-NEXT:    egpu.return
// CHECK-NEXT:  }
func.func @host(%x: memref<64x16xf32> {ein.name = "x"}, %y: memref<64xf32> {ein.name = "y", ein.output}) {
  egpu.launch @kernel_y(%x, %y) : memref<64x16xf32>, memref<64xf32>
  func.return
}
egpu.func @kernel_y(%x: memref<64x16xf32> {ein.name = "x"}, %y: memref<64xf32>) grid [1, 1, 1] block [64, 1, 1] {
  egpu.return
}

// -----

// Work-item coordinates along each dimension.

// CHECK-LABEL: egpu.func @coordinates
// CHECK-NEXT:    %{{.*}} = egpu.block_id x
// CHECK-NEXT:    %{{.*}} = egpu.thread_id y
// CHECK-NEXT:    %{{.*}} = egpu.global_id z
// CHECK-NEXT:    %{{.*}} = egpu.block_dim x
// CHECK-NEXT:    %{{.*}} = egpu.grid_dim y
egpu.func @coordinates() grid [4, 2, 1] block [32, 2, 2] {
  %b = egpu.block_id x
  %t = egpu.thread_id y
  %g = egpu.global_id z
  %bd = egpu.block_dim x
  %gd = egpu.grid_dim y
  egpu.return
}

// -----

// Work-group memory and the barrier between its writes and reads.

// CHECK-LABEL: egpu.func @shared_tile
// CHECK:         %[[T:.*]] = egpu.alloc_shared : memref<64xf32>
// CHECK:         affine.store %{{.*}}, %[[T]][%{{.*}}] : memref<64xf32>
// CHECK-NEXT:    egpu.barrier
// CHECK-NEXT:    %{{.*}} = affine.load %[[T]][%{{.*}}] : memref<64xf32>
egpu.func @shared_tile(%a: memref<64xf32>) grid [1, 1, 1] block [64, 1, 1] {
  %tile = egpu.alloc_shared : memref<64xf32>
  %t = egpu.thread_id x
  %v = affine.load %a[%t] : memref<64xf32>
  affine.store %v, %tile[%t] : memref<64xf32>
  egpu.barrier
  %w = affine.load %tile[%t] : memref<64xf32>
  affine.store %w, %a[%t] : memref<64xf32>
  egpu.return
}

// -----

// Vector loads, fused multiply-add, horizontal reduction and stores of a given width.

// CHECK-LABEL: egpu.func @vectors
// CHECK:         %[[V:.*]] = egpu.vload %{{.*}}[%{{.*}}] : memref<64xf32> -> vector<4xf32>
// CHECK-NEXT:    %[[F:.*]] = egpu.vfma %[[V]], %[[V]], %[[V]] : vector<4xf32>
// CHECK-NEXT:    %{{.*}} = egpu.vreduce add %[[F]] : vector<4xf32> -> f32
// CHECK-NEXT:    egpu.vstore %[[F]], %{{.*}}[%{{.*}}] : vector<4xf32>, memref<64xf32>
egpu.func @vectors(%a: memref<64xf32>) grid [1, 1, 1] block [16, 1, 1] {
  %t = egpu.thread_id x
  %v = egpu.vload %a[%t] : memref<64xf32> -> vector<4xf32>
  %f = egpu.vfma %v, %v, %v : vector<4xf32>
  %s = egpu.vreduce add %f : vector<4xf32> -> f32
  egpu.vstore %f, %a[%t] : vector<4xf32>, memref<64xf32>
  egpu.return
}

// -----

// A run of 2 elements repeated over a vector of 8 lanes (egpu.vload_repeat: the pair form's
// input of two groups).

// CHECK-LABEL: egpu.func @repeated_run
// CHECK:         %{{.*}} = egpu.vload_repeat %{{.*}}[%{{.*}}] run 2 : memref<64xf32> -> vector<8xf32>
egpu.func @repeated_run(%a: memref<64xf32>) grid [1, 1, 1] block [16, 1, 1] {
  %t = egpu.thread_id x
  %v = egpu.vload_repeat %a[%t] run 2 : memref<64xf32> -> vector<8xf32>
  egpu.vstore %v, %a[%t] : vector<8xf32>, memref<64xf32>
  egpu.return
}

// -----

// A reduction over the subgroup (warp, wave).

// CHECK-LABEL: egpu.func @warp_sum
// CHECK:         %{{.*}} = egpu.subgroup_reduce add %{{.*}} : f32
// CHECK:         %{{.*}} = egpu.subgroup_reduce max %{{.*}} : i32
egpu.func @warp_sum(%a: memref<32xf32>, %b: memref<32xi32>) grid [1, 1, 1] block [32, 1, 1] {
  %t = egpu.thread_id x
  %v = affine.load %a[%t] : memref<32xf32>
  %s = egpu.subgroup_reduce add %v : f32
  %i = affine.load %b[%t] : memref<32xi32>
  %m = egpu.subgroup_reduce max %i : i32
  egpu.return
}

// -----

// Narrow floats kept in memory: widened loads, narrowed stores, rounding in the wide type.

// CHECK-LABEL: egpu.func @halves_in_memory
// CHECK:         %[[X:.*]] = egpu.load_extf %{{.*}}[%{{.*}}] : memref<8xf16> -> f32
// CHECK-NEXT:    %[[R:.*]] = egpu.round %[[X]] as f16 : f32
// CHECK-NEXT:    egpu.store_truncf %[[R]], %{{.*}}[%{{.*}}] : f32, memref<8xf16>
egpu.func @halves_in_memory(%a: memref<8xf16>) grid [1, 1, 1] block [8, 1, 1] {
  %t = egpu.thread_id x
  %x = egpu.load_extf %a[%t] : memref<8xf16> -> f32
  %r = egpu.round %x as f16 : f32
  egpu.store_truncf %r, %a[%t] : f32, memref<8xf16>
  egpu.return
}
