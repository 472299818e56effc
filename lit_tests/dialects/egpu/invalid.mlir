// RUN: einc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK: Operation does not verify: egpu.func: grid must be three positive sizes (x, y, z), got [0, 1, 1]
egpu.func @empty_grid() grid [0, 1, 1] block [1, 1, 1] {
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.func: block must be three positive sizes (x, y, z), got [64, 1]
egpu.func @two_block_sizes() grid [1, 1, 1] block [64, 1] {
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.func: argument 0 is f32, kernels take buffers
egpu.func @scalar_argument(%x: f32) grid [1, 1, 1] block [1, 1, 1] {
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.thread_id: only valid inside an egpu.func
func.func @coordinate_on_the_host() {
  %t = egpu.thread_id x
  func.return
}

// -----

// CHECK: Operation does not verify: egpu.barrier: only valid inside an egpu.func
func.func @barrier_on_the_host() {
  egpu.barrier
  func.return
}

// -----

// CHECK: Operation does not verify: egpu.alloc_shared: only at the top level of an egpu.func
egpu.func @shared_in_a_loop() grid [1, 1, 1] block [1, 1, 1] {
  affine.for %i = 0 to 4 {
    %s = egpu.alloc_shared : memref<4xf32>
  }
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.launch: buffer types differ from those of @k
func.func @launch_type_mismatch(%a: memref<8xf32>) {
  egpu.launch @k(%a) : memref<8xf32>
  func.return
}
egpu.func @k(%a: memref<4xf32>) grid [1, 1, 1] block [4, 1, 1] {
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.launch: launches happen on the host, not in a kernel
egpu.func @launch_in_a_kernel(%a: memref<4xf32>) grid [1, 1, 1] block [4, 1, 1] {
  egpu.launch @launch_in_a_kernel(%a) : memref<4xf32>
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.vload: vector width 5 is not one of [2, 3, 4, 8, 16]
egpu.func @odd_vector_width(%a: memref<64xf32>) grid [1, 1, 1] block [1, 1, 1] {
  %t = egpu.thread_id x
  %v = egpu.vload %a[%t] : memref<64xf32> -> vector<5xf32>
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.vstore: vector of f64 on a buffer of f32
egpu.func @vector_element_mismatch(%a: memref<64xf32>, %v: memref<4xf64>) grid [1, 1, 1] block [1, 1, 1] {
  %t = egpu.thread_id x
  %w = egpu.vload %v[%t] : memref<4xf64> -> vector<4xf64>
  egpu.vstore %w, %a[%t] : vector<4xf64>, memref<64xf32>
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.vreduce: result type i32 differs from the vector's element type f32
egpu.func @reduce_result_type(%a: memref<64xf32>) grid [1, 1, 1] block [1, 1, 1] {
  %t = egpu.thread_id x
  %v = egpu.vload %a[%t] : memref<64xf32> -> vector<4xf32>
  %s = egpu.vreduce add %v : vector<4xf32> -> i32
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.load_extf: the buffer's f32 must be a float narrower than f32
egpu.func @extf_not_narrower(%a: memref<8xf32>) grid [1, 1, 1] block [1, 1, 1] {
  %t = egpu.thread_id x
  %x = egpu.load_extf %a[%t] : memref<8xf32> -> f32
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.round: f32 is not narrower than f32
egpu.func @round_to_same_width(%a: memref<8xf32>) grid [1, 1, 1] block [1, 1, 1] {
  %t = egpu.thread_id x
  %x = affine.load %a[%t] : memref<8xf32>
  %r = egpu.round %x as f32 : f32
  egpu.return
}

// -----

// CHECK: Operation does not verify: egpu.vload_repeat: a run of 3 does not repeat over a vector of 8
egpu.func @repeat_not_dividing(%a: memref<64xf32>) grid [1, 1, 1] block [1, 1, 1] {
  %t = egpu.thread_id x
  %v = egpu.vload_repeat %a[%t] run 3 : memref<64xf32> -> vector<8xf32>
  egpu.return
}
