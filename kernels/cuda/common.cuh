// What the CUDA C++ kernels share word for word (matmul.cu only the host pass's torch headers).
//
// Both nvcc passes: the dtype tag the torch wrapper hands to the plain-CUDA dispatcher, and the
// element <-> fp32 conversions (bf16/fp16 math is done in fp32, rounded to nearest on the way out).
// Host pass only (`!__CUDA_ARCH__`, and not when a test defines GPUPERF_KERNELS_ONLY to build the
// kernels without torch): torch's headers for the wrappers and the at::ScalarType -> DType mapping,
// so the device pass still never parses torch's headers.
//
// Included as "common.cuh": nvcc looks next to the including .cu first, both for
// torch.utils.cpp_extension.load (kernels/cuda_ext.py) and for tests/test_cuda_sources.py, which
// compiles every *.cu (this header only through them).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gpuperf_common {

enum class DType : int { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

}  // namespace gpuperf_common

#if !defined(__CUDA_ARCH__) && !defined(GPUPERF_KERNELS_ONLY)  // host pass only: torch and pybind11
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>

namespace gpuperf_common {

// The kernels' dtype tag for a float32, bfloat16 or float16 tensor; any other dtype is an error.
inline DType dtype_of(const at::Tensor& x) {
  DType dtype;
  switch (x.scalar_type()) {
    case at::kFloat: dtype = DType::kFloat32; break;
    case at::kBFloat16: dtype = DType::kBFloat16; break;
    case at::kHalf: dtype = DType::kFloat16; break;
    default: TORCH_CHECK(false, "unsupported dtype ", x.scalar_type());
  }
  return dtype;
}

}  // namespace gpuperf_common
#endif  // !__CUDA_ARCH__ && !GPUPERF_KERNELS_ONLY
