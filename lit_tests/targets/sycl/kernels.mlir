// RUN: einc-opt %s --split-input-file -p "convert-ein-to-affine,legalize-f16-for-c,convert-affine-to-egpu{target=sycl},canonicalize,cse" -t sycl | filecheck %s

// SYCL: free-function nd-range kernels for the kernel_compiler extension; x is SYCL
// dimension 2; sycl:: math built-ins, sycl::half storage.

func.func @matmul(%A: tensor<4x3xf32> {ein.name = "A"}, %B: tensor<3x5xf32> {ein.name = "B"}) -> tensor<4x5xf32> {
  %C = ein.einsum "C" add parallel [N = 4, M = 5] reduce [K = 3] : tensor<4x5xf32> {
  ^bb0(%N : index, %M : index, %K : index):
    %a = ein.load %A[%N, %K] : tensor<4x3xf32>
    %b = ein.load %B[%K, %M] : tensor<3x5xf32>
    %p = arith.mulf %a, %b : f32
    ein.yield %p : f32
  }
  func.return %C : tensor<4x5xf32>
}

// CHECK:      #include <cstdint>
// CHECK-NEXT: #include <limits>
// CHECK-NEXT: #include <sycl/builtins.hpp>
// CHECK-NEXT: #include <sycl/group_barrier.hpp>
// CHECK-NEXT: #include <sycl/half_type.hpp>
// CHECK-NEXT: #include <sycl/ext/oneapi/free_function_queries.hpp>
// CHECK-NEXT: #include <sycl/ext/oneapi/free_function_kernel_properties.hpp>
// CHECK-NEXT: #include <sycl/ext/oneapi/work_group_static.hpp>
// CHECK-NEXT: namespace syclext = sycl::ext::oneapi;
// CHECK-NEXT: namespace syclexp = sycl::ext::oneapi::experimental;
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
// CHECK-NEXT: void matmul_C(const float* A, const float* B, float* C) {
// CHECK-NEXT:   int64_t gid = (int64_t)syclext::this_work_item::get_nd_item<3>().get_global_id(2);
// CHECK-NEXT:   int64_t N = gid / 5;
// CHECK-NEXT:   int64_t M = gid % 5;
// CHECK-NEXT:   C[N * 5 + M] = 0.0f;
// CHECK-NEXT:   for (int64_t K = 0; K < 3; K++) {
// CHECK-NEXT:     C[N * 5 + M] = C[N * 5 + M] + A[N * 3 + K] * B[K * 5 + M];
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

func.func @row_max_then_scale(%X: tensor<3x100xf32> {ein.name = "X"}) -> tensor<3x100xf32> {
  %m = ein.einsum "Mx" max parallel [N = 3] reduce [C = 100] : tensor<3xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x100xf32>
    ein.yield %x : f32
  }
  %y = ein.einsum "Y" assign parallel [N = 3, C = 100] : tensor<3x100xf32> {
  ^bb0(%N : index, %C : index):
    %x = ein.load %X[%N, %C] : tensor<3x100xf32>
    %s = ein.load %m[%N] : tensor<3xf32>
    %e = math.exp %x : f32
    %d = arith.divf %e, %s : f32
    ein.yield %d : f32
  }
  func.return %y : tensor<3x100xf32>
}

// CHECK:      #include <cstdint>
// CHECK-NEXT: #include <limits>
// CHECK-NEXT: #include <sycl/builtins.hpp>
// CHECK-NEXT: #include <sycl/group_barrier.hpp>
// CHECK-NEXT: #include <sycl/half_type.hpp>
// CHECK-NEXT: #include <sycl/ext/oneapi/free_function_queries.hpp>
// CHECK-NEXT: #include <sycl/ext/oneapi/free_function_kernel_properties.hpp>
// CHECK-NEXT: #include <sycl/ext/oneapi/work_group_static.hpp>
// CHECK-NEXT: namespace syclext = sycl::ext::oneapi;
// CHECK-NEXT: namespace syclexp = sycl::ext::oneapi::experimental;
// CHECK-EMPTY:
// CHECK-NEXT: static inline float einc_maximumf_f32(float a, float b) { float r = a > b ? a : b; r = b != b ? b : r; r = a != a ? a : r; return ((a == 0) & (b == 0)) ? a + b : r; }
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
// CHECK-NEXT: void row_max_then_scale_Mx(const float* X, float* Mx) {
// CHECK-NEXT:   int64_t N = (int64_t)syclext::this_work_item::get_nd_item<3>().get_global_id(2);
// CHECK-NEXT:   Mx[N] = -std::numeric_limits<float>::infinity();
// CHECK-NEXT:   for (int64_t C = 0; C < 100; C++) {
// CHECK-NEXT:     Mx[N] = einc_maximumf_f32(Mx[N], X[N * 100 + C]);
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
// CHECK-NEXT: void row_max_then_scale_Y(const float* X, float* Y, const float* Mx) {
// CHECK-NEXT:   int64_t gid = (int64_t)syclext::this_work_item::get_nd_item<3>().get_global_id(2);
// CHECK-NEXT:   if (gid < 300) {
// CHECK-NEXT:     int64_t N = gid / 100;
// CHECK-NEXT:     int64_t C = gid % 100;
// CHECK-NEXT:     Y[N * 100 + C] = sycl::exp(X[N * 100 + C]) / Mx[N];
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

func.func @halves_and_bytes(%H: tensor<8xf16> {ein.name = "H"}, %Q: tensor<8xi8> {ein.name = "Q"}) -> tensor<8xf16> {
  %y = ein.einsum "Y" assign parallel [N = 8] : tensor<8xf16> {
  ^bb0(%N : index):
    %h = ein.load %H[%N] : tensor<8xf16>
    %i = ein.load %Q[%N] : tensor<8xi8>
    %s = arith.addi %i, %i : i8
    %f = arith.sitofp %s : i8 to f16
    %p = arith.mulf %h, %f : f16
    ein.yield %p : f16
  }
  func.return %y : tensor<8xf16>
}

// CHECK:      #include <cstdint>
// CHECK-NEXT: #include <limits>
// CHECK-NEXT: #include <sycl/builtins.hpp>
// CHECK-NEXT: #include <sycl/group_barrier.hpp>
// CHECK-NEXT: #include <sycl/half_type.hpp>
// CHECK-NEXT: #include <sycl/ext/oneapi/free_function_queries.hpp>
// CHECK-NEXT: #include <sycl/ext/oneapi/free_function_kernel_properties.hpp>
// CHECK-NEXT: #include <sycl/ext/oneapi/work_group_static.hpp>
// CHECK-NEXT: namespace syclext = sycl::ext::oneapi;
// CHECK-NEXT: namespace syclexp = sycl::ext::oneapi::experimental;
// CHECK-EMPTY:
// CHECK-NEXT: extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<3>))
// CHECK-NEXT: void halves_and_bytes_Y(const sycl::half* H, const int8_t* Q, sycl::half* Y) {
// CHECK-NEXT:   int64_t N = (int64_t)syclext::this_work_item::get_nd_item<3>().get_global_id(2);
// CHECK-NEXT:   int8_t i = Q[N];
// CHECK-NEXT:   Y[N] = (sycl::half)((float)H[N] * (float)(sycl::half)(int8_t)(i + i));
// CHECK-NEXT: }
