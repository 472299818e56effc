// RUN: einc-opt %s --load-pass-plugin %S/../../examples/plugins/double_constants.py -p 'annotate-constants{tag=c},cse' | filecheck %s
// RUN: not einc-opt %s --load-pass-plugin %S/inputs/no_pass.py 2>&1 | filecheck %s --check-prefix=NOPASS
// RUN: not einc-opt %s --load-pass-plugin %S/../../examples/plugins/double_constants.py -p 'annotate-constant' 2>&1 | filecheck %s --check-prefix=TYPO

// A pass in a separate file runs like a built-in, its options parsed like theirs.

func.func @f(%a: memref<4xf32>) {
  %0 = arith.constant 1.5 : f32
  %1 = arith.constant 2 : index
  %2 = arith.constant -0.5 : f32
  memref.store %0, %a[%1] : memref<4xf32>
  memref.store %2, %a[%1] : memref<4xf32>
  func.return
}

// CHECK:      %0 = arith.constant {einc.note = "c #0"} 1.500000e+00 : f32
// CHECK-NEXT: %1 = arith.constant 2 : index
// CHECK-NEXT: %2 = arith.constant {einc.note = "c #1"} -5.000000e-01 : f32

// NOPASS: <command line>:1:{{[0-9]+}}: error: the pass plugin '{{.*}}no_pass.py' defines no pass (a subclass of xdsl.passes.ModulePass with a `name`)
// NOPASS-NEXT: einc-opt {{.*}} --load-pass-plugin {{.*}}no_pass.py
// NOPASS-NOT: Traceback

// TYPO: pass-pipeline:1:1: error: unknown pass 'annotate-constant' (did you mean 'annotate-constants'?)
