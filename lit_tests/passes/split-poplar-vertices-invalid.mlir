// RUN: einc-opt %s --split-input-file --verify-diagnostics
// #egpu.tile_split is verified when parsed: its points in chunks make its vertex count, a
// split writes something, and each read slice has one (first, end) per vertex.

// expected-error @+1 {{egpu.tile_split: 10 points in chunks of 5 are not 3 vertices (or nothing is sliced)}}
"test.op"() {split = #egpu.tile_split<vertices = 3, bytes = 16, points = 10, chunk = 5, written = [0 at 1 * point + 0], read = []>} : () -> ()


// -----

// expected-error @+1 {{egpu.tile_split: a read slice per vertex}}
"test.op"() {split = #egpu.tile_split<vertices = 2, bytes = 16, points = 10, chunk = 5, written = [0 at 1 * point + 0], read = [1 from [0, 1, 2] to [1, 2, 3]]>} : () -> ()


// -----

// expected-error @+1 {{egpu.tile_split: one vertex has no points or slices}}
"test.op"() {split = #egpu.tile_split<vertices = 1, bytes = 16, points = 10, chunk = 10, written = [], read = []>} : () -> ()

