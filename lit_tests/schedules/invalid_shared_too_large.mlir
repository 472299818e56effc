// RUN: not einc-opt %s -p 'convert-ein-to-affine,einc-apply-schedule{file="%s"},convert-affine-to-egpu{target=cuda}' 2>&1 | filecheck %s

// A 128 x 128 float32 tile of A (64 KiB) is more than CUDA's 48 KiB of shared memory per
// block: refused when the kernel is built, before any code is printed.

func.func @too_much_shared_memory(%A: tensor<256x256xf32> {ein.name = "A"}) -> tensor<256xf32> {
  %C = ein.einsum "C" add parallel [N = 256] reduce [K = 256] : tensor<256xf32> {
  ^bb0(%N : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<256x256xf32>
    ein.yield %a : f32
  }
  func.return %C : tensor<256xf32>
}
transform.named_sequence @__transform_main(%root: !transform.any_op) {
  %n = transform.einc.match stmt "C" axis "N" in %root
  %k = transform.einc.match stmt "C" axis "K" in %root
  %no, %ni = transform.einc.tile %n by 128
  %ko, %ki = transform.einc.tile %k by 128
  transform.einc.bind %no to "block.x"
  transform.einc.bind %ni to "thread.x"
  %s = transform.einc.cache_read "A" at %ko in "shared"
  transform.yield
}

// CHECK: <target>:1:1: error: cuda target: kernel too_much_shared_memory_C_1 cannot be launched: 65536 bytes of shared memory (at most 49152)
