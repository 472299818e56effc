// RUN: einc-opt --list-passes --load-pass-plugin %S/../../examples/plugins/double_constants.py | filecheck %s
// RUN: einc-opt --list-passes --all | filecheck %s --check-prefix=ALL
// RUN: einc-opt --help | filecheck %s --check-prefix=HELP

// Each pass with its one-line summary and its options (type and default); plugins' passes
// after einc's, with the file they came from; xDSL's only with --all.

// CHECK:      einc's passes:
// CHECK:        einc-tile  Strip-mine the loops of one statement's axis.
// CHECK-NEXT:       stmt: str = ""
// CHECK-NEXT:       axis: str = ""
// CHECK-NEXT:       size: int = 32
// CHECK:      plugin passes:
// CHECK-NEXT:   annotate-constants  Tag each floating-point constant with `einc.note = "<tag> #<n>"` (numbers unchanged). [from {{.*}}double_constants.py]
// CHECK-NEXT:       tag: str = "constant"
// CHECK-NEXT: (einc-opt --list-passes --all also lists xDSL's passes)
// CHECK-NOT:  arith-add-fastmath

// ALL: xDSL's passes:
// ALL: arith-add-fastmath

// HELP: -p PASSES, --passes PASSES
// HELP: convert-ein-to-affine
// HELP-NOT: arith-add-fastmath
