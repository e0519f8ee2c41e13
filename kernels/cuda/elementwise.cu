// Elementwise activations: ELU, GeLU (tanh approximation) and GeLU (exact erf), one extension.
//
// Memory-bound streaming kernel: each thread moves UNROLL 16-byte vectors and issues all its loads
// before the first use, so several requests are in flight per thread; bf16/fp16 are computed in
// fp32. Any size: a scalar head brings the pointers to 16-byte alignment (when input and output
// share the same misalignment), then 16-byte vectors, then a scalar tail; when input and output
// are misaligned differently the same kernel runs with 1-element "vectors".
//
// Layout of this file: the kernels and a plain-CUDA dispatcher first (seen by both nvcc passes),
// then the torch/pybind11 wrapper inside `#ifndef __CUDA_ARCH__`, so the device pass never parses
// torch's headers (this roughly halves the build; the dispatcher instantiates every kernel
// template in both passes, as nvcc requires). common.cuh: dtype tag, conversions, torch headers.
#include "common.cuh"

#include <cstdint>

namespace gpuperf_elementwise {

enum class Op : int { kElu = 0, kGeluTanh = 1, kGeluErf = 2 };
using gpuperf_common::DType;
using gpuperf_common::from_float;
using gpuperf_common::to_float;

// kNarrow: the output is 16-bit (8 or 11 significant bits), so fp32 math may be less exact.
template <Op op, bool kNarrow>
__device__ __forceinline__ float apply(float x, float alpha) {
  if constexpr (op == Op::kElu && kNarrow) {
    // exp(x) - 1 with the fast exp (relative error < 1e-5 for x <= -1/32), and the series
    // x + x^2/2 + x^3/6 above -1/32, where the subtraction would cancel (error < 2e-6): far below
    // a 16-bit output's rounding. expm1f costs ~20 instructions an element, which left bf16 ELU
    // instruction-bound: 0.352 ms on an H200, where the copy limit is 0.252 ms (not re-timed there
    // yet). On an H100 it is at copy speed either way: 0.354 ms at 16384x16384, 97% of copy.
    const float series = x * fmaf(x, fmaf(x, 1.0f / 6.0f, 0.5f), 1.0f);
    return x > 0.0f ? x : alpha * (x > -0.03125f ? series : __expf(x) - 1.0f);
  } else if constexpr (op == Op::kElu) {
    // expm1f keeps full relative accuracy for small negative x (exp(x) - 1 cancels there).
    return x > 0.0f ? x : alpha * expm1f(x);
  } else if constexpr (op == Op::kGeluTanh) {
    // 0.5 x (1 + tanh(u)) == x * sigmoid(2u) == x / (1 + exp(-2u)): no cancellation for x << 0.
    // NaN stays NaN, +inf -> +inf, -inf -> -inf/inf = NaN (as the reference formula gives).
    constexpr float k2SqrtTwoOverPi = 2.0f * 0.7978845608028654f;
    const float u2 = k2SqrtTwoOverPi * fmaf(0.044715f * x, x * x, x);
    return __fdividef(x, 1.0f + __expf(-u2));
  } else {
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
  }
}

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// head: scalar elements before the first aligned vector; nvec: vectors after it; the rest is the tail.
template <typename T, int VEC, int UNROLL, Op op>
__global__ void __launch_bounds__(256) activation_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n,
                                                         int64_t head, int64_t nvec, float alpha) {
  using P = Pack<T, VEC>;
  const P* __restrict__ xv = reinterpret_cast<const P*>(x + head);
  P* __restrict__ yv = reinterpret_cast<P*>(y + head);

  const int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x * UNROLL + threadIdx.x;
  P buf[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const int64_t i = base + static_cast<int64_t>(u) * blockDim.x;
    if (i < nvec) buf[u] = xv[i];
  }
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const int64_t i = base + static_cast<int64_t>(u) * blockDim.x;
    if (i < nvec) {
      P out;
#pragma unroll
      for (int k = 0; k < VEC; ++k) out.v[k] = from_float<T>(apply<op, sizeof(T) == 2>(to_float(buf[u].v[k]), alpha));
      yv[i] = out;
    }
  }

  if (blockIdx.x == 0) {  // head and tail: fewer than VEC elements each
    const int64_t t = threadIdx.x;
    if (t < head) y[t] = from_float<T>(apply<op, sizeof(T) == 2>(to_float(x[t]), alpha));
    const int64_t tail_start = head + nvec * VEC;
    if (tail_start + t < n) y[tail_start + t] = from_float<T>(apply<op, sizeof(T) == 2>(to_float(x[tail_start + t]), alpha));
  }
}

constexpr int kThreads = 256;

template <typename T, int VEC, int UNROLL, Op op>
cudaError_t launch_with(const T* x, T* y, int64_t n, int64_t head, float alpha, cudaStream_t stream) {
  const int64_t nvec = (n - head) / VEC;
  const int64_t per_block = static_cast<int64_t>(kThreads) * UNROLL;
  const int64_t blocks = (nvec + per_block - 1) / per_block;
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  activation_kernel<T, VEC, UNROLL, op>
      <<<static_cast<unsigned>(blocks > 0 ? blocks : 1), kThreads, 0, stream>>>(x, y, n, head, nvec, alpha);
  return cudaGetLastError();
}

template <typename T, Op op>
cudaError_t launch_typed(const void* xp, void* yp, int64_t n, float alpha, int unroll, cudaStream_t stream) {
  const T* x = static_cast<const T*>(xp);
  T* y = static_cast<T*>(yp);
  constexpr int kVec = 16 / sizeof(T);
  const auto xa = reinterpret_cast<std::uintptr_t>(x) % 16;
  const auto ya = reinterpret_cast<std::uintptr_t>(y) % 16;
  if (xa != ya) return launch_with<T, 1, 8, op>(x, y, n, 0, alpha, stream);  // scalar, still coalesced
  int64_t head = static_cast<int64_t>(((16 - xa) % 16) / sizeof(T));
  if (head > n) head = n;
  switch (unroll) {
    case 1: return launch_with<T, kVec, 1, op>(x, y, n, head, alpha, stream);
    case 2: return launch_with<T, kVec, 2, op>(x, y, n, head, alpha, stream);
    case 4: return launch_with<T, kVec, 4, op>(x, y, n, head, alpha, stream);
    case 8: return launch_with<T, kVec, 8, op>(x, y, n, head, alpha, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <Op op>
cudaError_t launch_op(DType dtype, const void* x, void* y, int64_t n, float alpha, int unroll, cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat32: return launch_typed<float, op>(x, y, n, alpha, unroll, stream);
    case DType::kBFloat16: return launch_typed<__nv_bfloat16, op>(x, y, n, alpha, unroll, stream);
    case DType::kFloat16: return launch_typed<__half, op>(x, y, n, alpha, unroll, stream);
  }
  return cudaErrorInvalidValue;
}

// The one entry point the wrapper calls; instantiates every kernel in both compiler passes.
cudaError_t launch(Op op, DType dtype, const void* x, void* y, int64_t n, float alpha, int unroll,
                   cudaStream_t stream) {
  switch (op) {
    case Op::kElu: return launch_op<Op::kElu>(dtype, x, y, n, alpha, unroll, stream);
    case Op::kGeluTanh: return launch_op<Op::kGeluTanh>(dtype, x, y, n, alpha, unroll, stream);
    case Op::kGeluErf: return launch_op<Op::kGeluErf>(dtype, x, y, n, alpha, unroll, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace gpuperf_elementwise

#ifndef __CUDA_ARCH__  // host pass only: torch and pybind11 (their headers: common.cuh)

#include <string>

namespace gpuperf_elementwise {

at::Tensor run(Op op, const at::Tensor& x, double alpha, int64_t unroll) {
  TORCH_CHECK(x.is_cuda(), "expected a CUDA tensor, got one on ", x.device());
  TORCH_CHECK(unroll == 1 || unroll == 2 || unroll == 4 || unroll == 8, "unroll must be 1, 2, 4 or 8, got ", unroll);
  const DType dtype = gpuperf_common::dtype_of(x);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in, at::MemoryFormat::Contiguous);
  if (in.numel() == 0) return out;
  const cudaError_t err = launch(op, dtype, in.data_ptr(), out.data_ptr(), in.numel(), static_cast<float>(alpha),
                                 static_cast<int>(unroll), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "activation kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

at::Tensor elu(const at::Tensor& x, double alpha, int64_t unroll) { return run(Op::kElu, x, alpha, unroll); }

at::Tensor gelu(const at::Tensor& x, const std::string& approximate, int64_t unroll) {
  if (approximate == "tanh") return run(Op::kGeluTanh, x, 0.0, unroll);
  TORCH_CHECK(approximate == "erf" || approximate == "none", "approximate must be 'tanh', 'erf' or 'none', got ",
              approximate);
  return run(Op::kGeluErf, x, 0.0, unroll);
}

}  // namespace gpuperf_elementwise

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  // unroll: 16-byte vectors per thread, all loaded before the first is used.
  m.def("elu", &gpuperf_elementwise::elu, "ELU (fp32 math)", py::arg("x"), py::arg("alpha") = 1.0,
        py::arg("unroll") = 4);
  m.def("gelu", &gpuperf_elementwise::gelu, "GeLU, approximate='tanh' or 'erf' (fp32 math)", py::arg("x"),
        py::arg("approximate") = "tanh", py::arg("unroll") = 4);
}
#endif  // __CUDA_ARCH__
