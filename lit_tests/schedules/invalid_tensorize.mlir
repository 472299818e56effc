// RUN: printf 'input A: float32[32, 32]\ninput B: float32[32, 32]\nC[I, J] +=! A[I, K] * B[K, J]\n' > %t32.ein
// RUN: not einc compile %t32.ein -t cuda --schedule %s 2>&1 | filecheck %s --check-prefix=DTYPE
// RUN: printf 'input A: float16[32, 32]\ninput B: float16[32, 32]\nC[I, J] +=! A[I, K].cast(`float32`) * B[K, J].cast(`float32`)\n' > %t16.ein
// RUN: not einc compile %t16.ein -t opencl --schedule %s 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: sed 's/by 16/by 8/' %s > %t8.mlir
// RUN: not einc compile %t16.ein -t cuda --schedule %t8.mlir 2>&1 | filecheck %s --check-prefix=SHAPE

// Tensor cores take float16 or bfloat16 operands accumulated in float32, on CUDA and HIP
// only, in 16 x 16 tiles: anything else is refused at the tensorize op.

builtin.module {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %i = transform.einc.match stmt "C" axis "I" in %root
    %j = transform.einc.match stmt "C" axis "J" in %root
    %io, %ii = transform.einc.tile %i by 16
    %jo, %ji = transform.einc.tile %j by 16
    %r:4 = transform.einc.reorder %io, %jo, %ii, %ji
    %lanes = transform.einc.tensorize %r#2 "mma.m16n8k16"
    transform.yield
  }
}

// DTYPE: invalid_tensorize.mlir:18:5: error: cannot tensorize loop I.i of C: the product's factors must be float16 or bfloat16 tensors cast to float32
// TARGET: invalid_tensorize.mlir:18:5: error: the opencl target cannot tensorize with 'mma.m16n8k16': it has no tensor cores (CUDA: 'mma.m16n8k16'; HIP on CDNA: 'mfma.16x16x16')
// SHAPE: error: cannot tensorize loop I.i of C: the tile is 8 x 8 x 32; tensor cores need 16 x 16 x (a multiple of 16): tile the rows and columns by 16
