// RUN: einc-opt %s --split-input-file --pass-pipeline=convert-ein-to-affine | filecheck %s

// A reduction fills its output argument with the identity, then accumulates over a nest with
// the output axes outermost; loads of plain axes become affine.load.

func.func @matmul_fills_identity_then_accumulates(%A: tensor<4x3xf32> {ein.name = "A"}, %B: tensor<3x5xf32> {ein.name = "B"}) -> tensor<4x5xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 5] reduce [K = 3] : tensor<4x5xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x3xf32>
    %b = ein.load %B[%K, %M] : tensor<3x5xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<4x5xf32>
}

// CHECK-LABEL: func.func @matmul_fills_identity_then_accumulates(
// CHECK-SAME:      %[[A:.*]]: memref<4x3xf32> {ein.name = "A"}, %[[B:.*]]: memref<3x5xf32> {ein.name = "B"},
// CHECK-SAME:      %[[C:.*]]: memref<4x5xf32> {ein.name = "C", ein.output}) {
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    affine.for %[[I:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to 5 {
// CHECK-NEXT:        affine.store %[[ZERO]], %[[C]][%[[I]], %[[J]]] : memref<4x5xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[M:.*]] = 0 to 5 {
// CHECK-NEXT:        affine.for %[[K:.*]] = 0 to 3 {
// CHECK-NEXT:          %[[X:.*]] = affine.load %[[A]][%[[N]], %[[K]]] : memref<4x3xf32>
// CHECK-NEXT:          %[[Y:.*]] = affine.load %[[B]][%[[K]], %[[M]]] : memref<3x5xf32>
// CHECK-NEXT:          %[[P:.*]] = arith.mulf %[[X]], %[[Y]] : f32
// CHECK-NEXT:          %[[ACC:.*]] = affine.load %[[C]][%[[N]], %[[M]]] : memref<4x5xf32>
// CHECK-NEXT:          %[[SUM:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:          affine.store %[[SUM]], %[[C]][%[[N]], %[[M]]] : memref<4x5xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }

// -----

// An assignment stores the body's value directly: no fill nest.

func.func @assign_stores_directly(%X: tensor<6xf64> {ein.name = "X"}) -> tensor<6xf64> {
  %Y = ein.einsum "Y" assign parallel [N = 6] : tensor<6xf64> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<6xf64>
    %s = arith.mulf %x, %x : f64
    ein.yield %s : f64
  }
  func.return %Y : tensor<6xf64>
}

// CHECK-LABEL: func.func @assign_stores_directly(
// CHECK-SAME:      %[[X:.*]]: memref<6xf64> {ein.name = "X"}, %[[Y:.*]]: memref<6xf64> {ein.name = "Y", ein.output}) {
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 6 {
// CHECK-NEXT:      %[[V:.*]] = affine.load %[[X]][%[[N]]] : memref<6xf64>
// CHECK-NEXT:      %[[S:.*]] = arith.mulf %[[V]], %[[V]] : f64
// CHECK-NEXT:      affine.store %[[S]], %[[Y]][%[[N]]] : memref<6xf64>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return

// -----

// Integer max starts from the type's minimum; logical and/or combine as 0/1 via compares.

func.func @int_max_and_logical_or(%X: tensor<3x4xi32> {ein.name = "X"}) -> (tensor<3xi32>, tensor<3xi32>) {
  %m = ein.einsum "Mx" max parallel [N = 3] reduce [C = 4] : tensor<3xi32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x4xi32>
    ein.yield %x : i32
  }
  %o = ein.einsum "Any" or parallel [N = 3] reduce [C = 4] : tensor<3xi32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x4xi32>
    ein.yield %x : i32
  }
  func.return %m, %o : tensor<3xi32>, tensor<3xi32>
}

// CHECK-LABEL: func.func @int_max_and_logical_or(
// CHECK:         %[[MIN:.*]] = arith.constant -2147483648 : i32
// CHECK:         affine.store %[[MIN]]
// CHECK:         %[[ACC:.*]] = affine.load %{{.*}}[%{{.*}}] : memref<3xi32>
// CHECK-NEXT:    %{{.*}} = arith.maxsi %[[ACC]], %{{.*}} : i32
// CHECK:         %[[FALSE:.*]] = arith.constant 0 : i32
// CHECK:         affine.store %[[FALSE]]
// CHECK:         %[[ACC2:.*]] = affine.load %{{.*}}[%{{.*}}] : memref<3xi32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:    %[[L:.*]] = arith.cmpi ne, %[[ACC2]], %[[ZERO]] : i32
// CHECK-NEXT:    %[[R:.*]] = arith.cmpi ne, %{{.*}}, %[[ZERO]] : i32
// CHECK-NEXT:    %[[EITHER:.*]] = arith.ori %[[L]], %[[R]] : i1
// CHECK-NEXT:    %[[BIT:.*]] = arith.select %[[EITHER]], %[[ONE]], %[[ZERO]] : i32
// CHECK-NEXT:    affine.store %[[BIT]]

// -----

// A guarded access stays inside its scf.if branch; its affine.apply index is composed into
// the load's map.

func.func @guarded_load_stays_in_branch(%A: tensor<4xf32> {ein.name = "A"}) -> tensor<6xf32> {
  %r = ein.einsum "P" assign parallel [N = 6] : tensor<6xf32> {
  ^bb0(%N : index):
    %c1 = arith.constant 1 : index
    %ok = arith.cmpi sge, %N, %c1 : index
    %v = scf.if %ok -> (f32) {
      %i = affine.apply affine_map<(d0) -> (d0 - 1)>(%N)
      %x = ein.load %A[%i] : tensor<4xf32>
      scf.yield %x : f32
    } else {
      %z = arith.constant 0.0 : f32
      scf.yield %z : f32
    }
    ein.yield %v : f32
  }
  func.return %r : tensor<6xf32>
}

// CHECK-LABEL: func.func @guarded_load_stays_in_branch(
// CHECK:         affine.for %[[N:.*]] = 0 to 6 {
// CHECK:           %[[V:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK-NEXT:        %[[X:.*]] = affine.load %{{.*}}[%[[N]] + -1] : memref<4xf32>
// CHECK-NEXT:        scf.yield %[[X]] : f32
// CHECK-NEXT:      } else {
// CHECK:           affine.store %[[V]], %{{.*}}[%[[N]]] : memref<6xf32>
// CHECK-NOT:     affine.apply

// -----

// Floor division and modulo by constants stay affine.

func.func @reshape_through_floordiv_mod(%X: tensor<3x2xf32> {ein.name = "X"}) -> tensor<6xf32> {
  %y = ein.einsum "Y" assign parallel [N = 6] : tensor<6xf32> {
  ^bb0(%N : index):
    %i = affine.apply affine_map<(d0) -> (d0 floordiv 2)>(%N)
    %j = affine.apply affine_map<(d0) -> (d0 mod 2)>(%N)
    %x = ein.load %X[%i, %j] : tensor<3x2xf32>
    ein.yield %x : f32
  }
  func.return %y : tensor<6xf32>
}

// CHECK-LABEL: func.func @reshape_through_floordiv_mod(
// CHECK:         affine.for %[[N:.*]] = 0 to 6 {
// CHECK-NEXT:      %{{.*}} = affine.load %{{.*}}[%[[N]] floordiv 2, %[[N]] mod 2] : memref<3x2xf32>

// -----

// A gather's index comes from memory: the gathered access is a memref.load.

func.func @gather_uses_memref_load(%T: tensor<5x3xf64> {ein.name = "T"}, %I: tensor<4xi32> {ein.name = "I"}) -> tensor<4x3xf64> {
  %r = ein.einsum "G" assign parallel [F = 4, C = 3] : tensor<4x3xf64> {
  ^bb0(%F : index, %C : index):
    %i = ein.load %I[%F] : tensor<4xi32>
    %j = arith.index_cast %i : i32 to index
    %x = ein.load %T[%j, %C] : tensor<5x3xf64>
    ein.yield %x : f64
  }
  func.return %r : tensor<4x3xf64>
}

// CHECK-LABEL: func.func @gather_uses_memref_load(
// CHECK-SAME:      %[[T:.*]]: memref<5x3xf64> {ein.name = "T"}, %[[I:.*]]: memref<4xi32> {ein.name = "I"},
// CHECK:         affine.for %[[F:.*]] = 0 to 4 {
// CHECK-NEXT:      affine.for %[[C:.*]] = 0 to 3 {
// CHECK-NEXT:        %[[IDX:.*]] = affine.load %[[I]][%[[F]]] : memref<4xi32>
// CHECK-NEXT:        %[[J:.*]] = arith.index_cast %[[IDX]] : i32 to index
// CHECK-NEXT:        %{{.*}} = memref.load %[[T]][%[[J]], %[[C]]] : memref<5x3xf64>

// -----

// An intermediate result lives in a named allocation freed before the return; later
// statements read it.

func.func @intermediate_is_allocated(%X: tensor<3x4xf32> {ein.name = "X"}) -> tensor<3xf32> {
  %s = ein.einsum "S" add parallel [N = 3] reduce [C = 4] : tensor<3xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x4xf32>
    ein.yield %x : f32
  }
  %y = ein.einsum "Y" assign parallel [N = 3] : tensor<3xf32> {
  ^bb0(%N : index):
    %v = ein.load %s[%N] : tensor<3xf32>
    %d = arith.mulf %v, %v : f32
    ein.yield %d : f32
  }
  func.return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @intermediate_is_allocated(
// CHECK-SAME:      %{{.*}}: memref<3x4xf32> {ein.name = "X"}, %[[Y:.*]]: memref<3xf32> {ein.name = "Y", ein.output}) {
// CHECK:         %[[S:.*]] = memref.alloc() {ein.name = "S"} : memref<3xf32>
// CHECK:         affine.store %{{.*}}, %[[S]][%{{.*}}] : memref<3xf32>
// CHECK:         %[[V:.*]] = affine.load %[[S]][%{{.*}}] : memref<3xf32>
// CHECK:         affine.store %{{.*}}, %[[Y]][%{{.*}}] : memref<3xf32>
// CHECK:         memref.dealloc %[[S]] : memref<3xf32>
// CHECK-NEXT:    func.return

// -----

// A rank-0 result has no output loops: its fill and its update are single accesses.

func.func @rank0_sum(%X: tensor<5xf64> {ein.name = "X"}) -> tensor<f64> {
  %t = ein.einsum "T" add parallel [] reduce [N = 5] : tensor<f64> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<5xf64>
    ein.yield %x : f64
  }
  func.return %t : tensor<f64>
}

// CHECK-LABEL: func.func @rank0_sum(
// CHECK-SAME:      %[[X:.*]]: memref<5xf64> {ein.name = "X"}, %[[T:.*]]: memref<f64> {ein.name = "T", ein.output}) {
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-NEXT:    affine.store %[[ZERO]], %[[T]][] : memref<f64>
// CHECK-NEXT:    affine.for %[[N:.*]] = 0 to 5 {
// CHECK-NEXT:      %[[V:.*]] = affine.load %[[X]][%[[N]]] : memref<5xf64>
// CHECK-NEXT:      %[[ACC:.*]] = affine.load %[[T]][] : memref<f64>
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[V]] : f64
// CHECK-NEXT:      affine.store %[[SUM]], %[[T]][] : memref<f64>
// CHECK-NEXT:    }

// -----

// A result returned twice is computed into its first output and copied to the second; an
// input returned as is is copied too.

func.func @returned_twice_and_input_returned(%X: tensor<4xi32> {ein.name = "X"}) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
  %y = ein.einsum "Y" assign parallel [N = 4] : tensor<4xi32> {
  ^bb0(%N : index):
    %x = ein.load %X[%N] : tensor<4xi32>
    ein.yield %x : i32
  }
  func.return %y, %X, %y : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
}

// CHECK-LABEL: func.func @returned_twice_and_input_returned(
// CHECK-SAME:      %[[X:.*]]: memref<4xi32> {ein.name = "X"}, %[[Y:.*]]: memref<4xi32> {ein.name = "Y", ein.output},
// CHECK-SAME:      %[[XOUT:.*]]: memref<4xi32> {ein.name = "X", ein.output}, %[[Y2:.*]]: memref<4xi32> {ein.name = "Y", ein.output}) {
// CHECK:         affine.store %{{.*}}, %[[Y]][%{{.*}}] : memref<4xi32>
// CHECK:         affine.for %[[I:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[V:.*]] = affine.load %[[X]][%[[I]]] : memref<4xi32>
// CHECK-NEXT:      affine.store %[[V]], %[[XOUT]][%[[I]]] : memref<4xi32>
// CHECK:         affine.for %[[J:.*]] = 0 to 4 {
// CHECK-NEXT:      %[[W:.*]] = affine.load %[[Y]][%[[J]]] : memref<4xi32>
// CHECK-NEXT:      affine.store %[[W]], %[[Y2]][%[[J]]] : memref<4xi32>
