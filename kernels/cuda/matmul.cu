// C = A @ B in fp32 on the SIMT cores (FFMA): a shared-memory tiled SGEMM.
//
// Block tile 128 x 128, K step 8, 256 threads; each thread accumulates an 8 x 8 piece of C in
// registers, made of 2 x 2 blocks of 4 x 4 (rows ty*4.. and 64+ty*4.., columns tx*4.. and
// 64+tx*4..) so that its operands come out of shared memory as four 16-byte loads per k:
// A is stored transposed (As[k][m], rows padded by 4 floats so the transposing stores are
// conflict-free), B as is (Bs[k][n]). Per k a warp reads 2 distinct A vectors (broadcast) and
// 256 contiguous bytes of B, for 64 FFMAs per thread.
// Double buffering: the next K slice is fetched from global memory into registers (16-byte
// loads) while the current one is multiplied out of shared memory, then stored into the other
// buffer; one __syncthreads per K step.
// Tiles are visited in grouped order (8 tile-rows at a time) so that A and B tiles are reused
// from L2. Any M, N, K: edge tiles are zero-filled on load and masked on store; the 16-byte
// path needs K % 4 == 0, N % 4 == 0 and 16-byte aligned bases, otherwise scalar loads are used.
//
// Build for a kernel-only resource check: nvcc -DGPUPERF_KERNELS_ONLY -arch=sm_90a -cubin ...
// The torch wrapper is compiled in the host pass only (its headers: common.cuh), so the device
// pass never parses torch's headers.
#include "common.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gpuperf_matmul {

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256
constexpr int A_PAD = 4;
constexpr int GROUP_M = 8;
static_assert(THREADS == 256, "the load mappings below assume 256 threads");
static_assert(BM * BK == THREADS * 4 && BK * BN == THREADS * 4, "one float4 of A and of B per thread");

struct Fragment {
  float4 a;
  float4 b;
};

template <bool VEC>
__device__ __forceinline__ Fragment load_fragment(const float* __restrict__ A, const float* __restrict__ B,
                                                  int M, int N, int K, int a_row, int a_col, int b_row,
                                                  int b_col, int k0) {
  Fragment f;
  const int ka = k0 + a_col;
  const int kb = k0 + b_row;
  if (VEC) {
    // K % 4 == 0 and ka % 4 == 0, so ka < K means all four are in range (same for N).
    f.a = (a_row < M && ka < K) ? *reinterpret_cast<const float4*>(A + static_cast<size_t>(a_row) * K + ka)
                                : make_float4(0.f, 0.f, 0.f, 0.f);
    f.b = (kb < K && b_col < N) ? *reinterpret_cast<const float4*>(B + static_cast<size_t>(kb) * N + b_col)
                                : make_float4(0.f, 0.f, 0.f, 0.f);
  } else {
    const float* a_src = A + static_cast<size_t>(a_row) * K;
    const bool a_ok = a_row < M;
    f.a.x = (a_ok && ka + 0 < K) ? a_src[ka + 0] : 0.f;
    f.a.y = (a_ok && ka + 1 < K) ? a_src[ka + 1] : 0.f;
    f.a.z = (a_ok && ka + 2 < K) ? a_src[ka + 2] : 0.f;
    f.a.w = (a_ok && ka + 3 < K) ? a_src[ka + 3] : 0.f;
    const float* b_src = B + static_cast<size_t>(kb) * N;
    const bool b_ok = kb < K;
    f.b.x = (b_ok && b_col + 0 < N) ? b_src[b_col + 0] : 0.f;
    f.b.y = (b_ok && b_col + 1 < N) ? b_src[b_col + 1] : 0.f;
    f.b.z = (b_ok && b_col + 2 < N) ? b_src[b_col + 2] : 0.f;
    f.b.w = (b_ok && b_col + 3 < N) ? b_src[b_col + 3] : 0.f;
  }
  return f;
}

template <bool VEC>
__global__ void __launch_bounds__(THREADS, 2)
    sgemm_128x128x8(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M,
                    int N, int K) {
  __shared__ __align__(16) float As[2][BK][BM + A_PAD];
  __shared__ __align__(16) float Bs[2][BK][BN];

  const int tid = threadIdx.x;
  const int num_m = (M + BM - 1) / BM;
  const int num_n = (N + BN - 1) / BN;
  const int span = GROUP_M * num_n;
  const int pid = blockIdx.x;
  const int first_m = (pid / span) * GROUP_M;
  const int rows = min(num_m - first_m, GROUP_M);
  const int m0 = (first_m + (pid % span) % rows) * BM;
  const int n0 = ((pid % span) / rows) * BN;

  // Global -> shared mapping: A tile 128 x 8 as 128 rows of two float4, B tile 8 x 128 as
  // 8 rows of 32 float4 (a warp reads 512 contiguous bytes of one B row).
  const int a_r = tid >> 1;
  const int a_c = (tid & 1) << 2;
  const int b_r = tid >> 5;
  const int b_c = (tid & 31) << 2;
  // Compute mapping: 16 x 16 threads, each 2 x 2 blocks of 4 x 4.
  const int tx = tid & 15;
  const int ty = tid >> 4;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  auto store_fragment = [&](const Fragment& f, int buf) {
    As[buf][a_c + 0][a_r] = f.a.x;
    As[buf][a_c + 1][a_r] = f.a.y;
    As[buf][a_c + 2][a_r] = f.a.z;
    As[buf][a_c + 3][a_r] = f.a.w;
    *reinterpret_cast<float4*>(&Bs[buf][b_r][b_c]) = f.b;
  };

  const int k_tiles = (K + BK - 1) / BK;
  Fragment f = load_fragment<VEC>(A, B, M, N, K, m0 + a_r, a_c, b_r, n0 + b_c, 0);
  store_fragment(f, 0);
  __syncthreads();

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int cur = kt & 1;
    const bool has_next = kt + 1 < k_tiles;
    if (has_next) f = load_fragment<VEC>(A, B, M, N, K, m0 + a_r, a_c, b_r, n0 + b_c, (kt + 1) * BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][BM / 2 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][BN / 2 + tx * 4]);
      const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (has_next) store_fragment(f, cur ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = m0 + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + (i - 4));
    if (row >= M) continue;
    float* c_row = C + static_cast<size_t>(row) * N;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = n0 + h * (BN / 2) + tx * 4;
      const float* v = &acc[i][h * 4];
      if (VEC) {
        if (col < N) *reinterpret_cast<float4*>(c_row + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (col + j < N) c_row[col + j] = v[j];
      }
    }
  }
}

// Launch on `stream`; returns the launch's error code.
inline cudaError_t launch_sgemm(const float* A, const float* B, float* C, int M, int N, int K,
                                cudaStream_t stream) {
  const int blocks = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  const bool vec = K % 4 == 0 && N % 4 == 0 && reinterpret_cast<uintptr_t>(A) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(B) % 16 == 0 && reinterpret_cast<uintptr_t>(C) % 16 == 0;
  if (vec) {
    sgemm_128x128x8<true><<<blocks, THREADS, 0, stream>>>(A, B, C, M, N, K);
  } else {
    sgemm_128x128x8<false><<<blocks, THREADS, 0, stream>>>(A, B, C, M, N, K);
  }
  return cudaGetLastError();
}

}  // namespace gpuperf_matmul

#if !defined(__CUDA_ARCH__) && !defined(GPUPERF_KERNELS_ONLY)  // host pass only: torch and pybind11 (common.cuh)
#include <ATen/ops/empty.h>

#include <limits>

at::Tensor matmul(at::Tensor a, at::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "matmul: both operands must be CUDA tensors");
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat,
              "matmul: the SIMT kernel is fp32 only, got ", a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul: needs (M, K) @ (K, N), got ",
              a.sizes(), " @ ", b.sizes());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  TORCH_CHECK(M < kMax && N < kMax && K < kMax, "matmul: dimensions must fit in int32");
  const c10::cuda::CUDAGuard guard(a.device());
  a = a.contiguous();
  b = b.contiguous();
  auto c = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  if (K == 0) return c.zero_();
  const cudaError_t err =
      gpuperf_matmul::launch_sgemm(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), static_cast<int>(M),
                                   static_cast<int>(N), static_cast<int>(K), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "matmul: kernel launch failed: ", cudaGetErrorString(err));
  return c;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("matmul", &matmul, "C = A @ B for fp32 A (M x K), B (K x N): shared-memory tiled SIMT SGEMM");
}
#endif  // !__CUDA_ARCH__ && !GPUPERF_KERNELS_ONLY
