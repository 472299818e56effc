// RUN: einc-opt %s --split-input-file -p "legalize-storage-dtypes{target=hlsl}" | filecheck %s

// HLSL stores no int8 or float16: those buffers become int32 / float32 on host and kernel
// alike, the host argument keeps the program's dtype (egpu.dtype, the manifest's dtype);
// loads narrow and stores widen, exactly.

func.func @host(%a: memref<8xi8> {ein.name = "a"}, %b: memref<8xf16> {ein.name = "b", ein.output}) {
  egpu.launch @k(%a, %b) : memref<8xi8>, memref<8xf16>
  func.return
}
egpu.func @k(%a: memref<8xi8>, %b: memref<8xf16>) grid [1, 1, 1] block [8, 1, 1] {
  %i = egpu.global_id x
  %x = affine.load %a[%i] : memref<8xi8>
  %y = arith.sitofp %x : i8 to f16
  affine.store %y, %b[%i] : memref<8xf16>
  egpu.return
}

// CHECK-LABEL: func.func @host(
// CHECK-SAME:      %[[A:.*]]: memref<8xi32> {ein.name = "a", egpu.dtype = "int8"}, %[[B:.*]]: memref<8xf32> {ein.name = "b", ein.output, egpu.dtype = "float16"}) {
// CHECK-NEXT:    egpu.launch @k(%[[A]], %[[B]]) : memref<8xi32>, memref<8xf32>
// CHECK:       egpu.func @k(%[[KA:.*]]: memref<8xi32>, %[[KB:.*]]: memref<8xf32>)
// CHECK-NEXT:    %[[I:.*]] = egpu.global_id x
// CHECK-NEXT:    %[[W:.*]] = affine.load %[[KA]][%[[I]]] : memref<8xi32>
// CHECK-NEXT:    %[[X:.*]] = arith.trunci %[[W]] : i32 to i8
// CHECK-NEXT:    %[[Y:.*]] = arith.sitofp %[[X]] : i8 to f16
// CHECK-NEXT:    %[[Z:.*]] = arith.extf %[[Y]] : f16 to f32
// CHECK-NEXT:    affine.store %[[Z]], %[[KB]][%[[I]]] : memref<8xf32>

// -----

// Temporaries are widened too.

func.func @temp(%a: memref<8xi16> {ein.name = "a", ein.output}) {
  %t = memref.alloc() {ein.name = "t"} : memref<8xi16>
  egpu.launch @k(%t, %a) : memref<8xi16>, memref<8xi16>
  memref.dealloc %t : memref<8xi16>
  func.return
}
egpu.func @k(%t: memref<8xi16>, %a: memref<8xi16>) grid [1, 1, 1] block [8, 1, 1] {
  %i = egpu.global_id x
  %x = affine.load %t[%i] : memref<8xi16>
  affine.store %x, %a[%i] : memref<8xi16>
  egpu.return
}

// CHECK-LABEL: func.func @temp(
// CHECK-NEXT:    %{{.*}} = memref.alloc() {ein.name = "t", egpu.dtype = "int16"} : memref<8xi32>
