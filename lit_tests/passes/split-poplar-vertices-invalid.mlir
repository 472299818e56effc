// RUN: awk -v k=1 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.1.mlir
// RUN: not einc-opt %t.1.mlir 2>&1 | filecheck %s --check-prefix=S1
// RUN: awk -v k=2 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.2.mlir
// RUN: not einc-opt %t.2.mlir 2>&1 | filecheck %s --check-prefix=S2
// RUN: awk -v k=3 '/^\/\/ -----$/ { s++; print ""; next } { print (s == k - 1 ? $0 : "") }' %s > %t.3.mlir
// RUN: not einc-opt %t.3.mlir 2>&1 | filecheck %s --check-prefix=S3

// #egpu.tile_split is verified when parsed: its points in chunks make its vertex count, a
// split writes something, and each read slice has one (first, end) per vertex.

"test.op"() {split = #egpu.tile_split<vertices = 3, bytes = 16, points = 10, chunk = 5, written = [0 at 1 * point + 0], read = []>} : () -> ()

// S1: egpu.tile_split: 10 points in chunks of 5 are not 3 vertices (or nothing is written)

// -----

"test.op"() {split = #egpu.tile_split<vertices = 2, bytes = 16, points = 10, chunk = 5, written = [0 at 1 * point + 0], read = [1 from [0, 1, 2] to [1, 2, 3]]>} : () -> ()

// S2: egpu.tile_split: a read slice per vertex

// -----

"test.op"() {split = #egpu.tile_split<vertices = 1, bytes = 16, points = 10, chunk = 10, written = [], read = []>} : () -> ()

// S3: egpu.tile_split: one vertex has no points or slices
