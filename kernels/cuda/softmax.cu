// Row-wise softmax over the last dimension, fp32 math for bf16/fp16, one launch for any shape.
//
// Three kernels, chosen on the host by row length (nv = 16-byte vectors per row) and row count:
//   warp    one warp per row, the row kept in registers (nv <= 256: fp32 rows up to ~1K, bf16 ~2K);
//   block   one block per row (512 threads; 128 or 256 for shorter 16-bit rows), the row kept in
//           registers (nv <= 4096: fp32 up to 16K, bf16 up to 32K): one read and one write of every element;
//   cluster a thread-block cluster of C blocks per row (Hopper; C = 1 when there are enough rows
//           to fill the GPU): each block streams its slice with an online max/sum, the blocks
//           combine their (max, sum) through distributed shared memory, then each block writes its
//           slice (the second read of the slice mostly hits L2). Longer rows, and any row that
//           is not short when there are fewer rows than half the SMs, take this one.
// Every kernel keeps per-thread (max, sum-of-exp) pairs and combines them with warp shuffles: one
// reduction, not two. Rows need not be 16-byte aligned (odd row lengths): vector slots that fall
// outside the row are handled element by element. NaN/inf follow the float64 reference
// (x - max(x), exp, / sum): a NaN or +inf in a row makes the whole row NaN, a -inf gives 0, and a
// row of all -inf is NaN.
//
// Layout of this file: kernels and a plain-CUDA dispatcher first (both nvcc passes), the torch
// wrapper inside `#ifndef __CUDA_ARCH__` so the device pass never parses torch's headers.
// common.cuh: dtype tag, conversions, torch headers (host pass).
#include "common.cuh"

#include <cooperative_groups.h>

#include <cstdint>
#include <cstring>

namespace gpuperf_softmax {

namespace cg = cooperative_groups;

using gpuperf_common::DType;
using gpuperf_common::from_float;
using gpuperf_common::to_float;

enum class Path : int { kAuto = 0, kWarp = 1, kBlock = 2, kCluster = 3 };

// Element bits <-> float (host and device, so the packing below can be checked on a CPU).
template <typename T>
__host__ __device__ __forceinline__ float bits_to_float(unsigned bits);
template <>
__host__ __device__ __forceinline__ float bits_to_float<float>(unsigned bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
#endif
}
template <>
__host__ __device__ __forceinline__ float bits_to_float<__nv_bfloat16>(unsigned bits) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(bits)));
}
template <>
__host__ __device__ __forceinline__ float bits_to_float<__half>(unsigned bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

template <typename T>
__host__ __device__ __forceinline__ unsigned float_to_bits(float v);
template <>
__host__ __device__ __forceinline__ unsigned float_to_bits<float>(float v) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(v);
#else
  unsigned bits;
  memcpy(&bits, &v, sizeof bits);
  return bits;
#endif
}
template <>
__host__ __device__ __forceinline__ unsigned float_to_bits<__nv_bfloat16>(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
template <>
__host__ __device__ __forceinline__ unsigned float_to_bits<__half>(float v) {
  return __half_as_ushort(__float2half_rn(v));
}

// A 16-byte slot as four 32-bit words <-> VEC floats (element k of the slot sits at the lower
// address, i.e. in the low half of its little-endian word). The slot moves as one uint4: copying a
// struct of 8 bf16/half instead let nvcc split the access into eight 2-byte loads/stores (seen in
// the PTX; the bf16 kernels then ran at ~60% of the fp32 ones' bandwidth).
template <typename T, int VEC>
__host__ __device__ __forceinline__ void unpack_words(const unsigned (&w)[4], float (&v)[VEC]) {
  static_assert(VEC * sizeof(T) == 16, "a slot is 16 bytes");
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (sizeof(T) == 4) {
      v[i] = bits_to_float<T>(w[i]);
    } else {
      v[2 * i] = bits_to_float<T>(w[i] & 0xffffu);
      v[2 * i + 1] = bits_to_float<T>(w[i] >> 16);
    }
  }
}

template <typename T, int VEC>
__host__ __device__ __forceinline__ void pack_words(const float (&v)[VEC], unsigned (&w)[4]) {
  static_assert(VEC * sizeof(T) == 16, "a slot is 16 bytes");
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (sizeof(T) == 4) {
      w[i] = float_to_bits<T>(v[i]);
    } else {
      w[i] = float_to_bits<T>(v[2 * i]) | (float_to_bits<T>(v[2 * i + 1]) << 16);
    }
  }
}

// Vector slot i0..i0+VEC-1 of a row (i0 may be negative: the slot before the row's first aligned
// address). Slots wholly inside the row move as one 16-byte access; the others element by element,
// reading -inf (which contributes exp(-inf) = 0) outside the row. VEC == 1 is the scalar fallback.
template <typename T, int VEC>
__device__ __forceinline__ void load_slot(const T* __restrict__ row, int64_t i0, int64_t cols, float (&v)[VEC]) {
  if (i0 >= 0 && i0 + VEC <= cols) {
    if constexpr (VEC == 1) {
      v[0] = to_float(row[i0]);
    } else {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(row + i0));
      const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
      unpack_words<T, VEC>(w, v);
    }
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const int64_t i = i0 + e;
      v[e] = (i >= 0 && i < cols) ? to_float(row[i]) : -INFINITY;
    }
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void store_slot(T* __restrict__ row, int64_t i0, int64_t cols, const float (&v)[VEC]) {
  if (i0 >= 0 && i0 + VEC <= cols) {
    if constexpr (VEC == 1) {
      row[i0] = from_float<T>(v[0]);
    } else {
      unsigned w[4];
      pack_words<T, VEC>(v, w);
      __stwb(reinterpret_cast<uint4*>(row + i0), make_uint4(w[0], w[1], w[2], w[3]));
    }
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const int64_t i = i0 + e;
      if (i >= 0 && i < cols) row[i] = from_float<T>(v[e]);
    }
  }
}

// A slot as its raw 16 bytes, for 16-bit rows kept packed in registers: elements outside the row
// hold -inf's bits (their exp is 0). j >= nv (no slot): every element -inf.
template <typename T, int VEC>
__device__ __forceinline__ uint4 load_raw_slot(const T* __restrict__ row, int64_t i0, int64_t cols) {
  if (i0 >= 0 && i0 + VEC <= cols) return __ldg(reinterpret_cast<const uint4*>(row + i0));
  float v[VEC];
  load_slot<T, VEC>(row, i0, cols, v);
  unsigned w[4];
  pack_words<T, VEC>(v, w);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <typename T, int VEC>
__device__ __forceinline__ void unpack_slot(const uint4& raw, float (&v)[VEC]) {
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
  unpack_words<T, VEC>(w, v);
}

// exp(v - m), with exp(-inf - anything) = 0 (keeps all--inf slices from producing NaN); a NaN v stays NaN.
__device__ __forceinline__ float exp_shift(float v, float m) { return v == -INFINITY ? 0.0f : __expf(v - m); }
// exp(m - M) for a partial max m under the new max M (1 when equal: also for -inf == -inf).
__device__ __forceinline__ float rescale(float m, float M) { return m == M ? 1.0f : __expf(m - M); }

struct MaxSum {
  float m;  // max over the non-NaN elements seen (fmaxf ignores NaN; a NaN shows up in s instead)
  float s;  // sum of exp(x - m)
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float M = fmaxf(a.m, b.m);
  return {M, a.s * rescale(a.m, M) + b.s * rescale(b.m, M)};
}

__device__ __forceinline__ MaxSum warp_reduce(MaxSum a) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const MaxSum b{__shfl_xor_sync(0xffffffffu, a.m, off), __shfl_xor_sync(0xffffffffu, a.s, off)};
    a = combine(a, b);
  }
  return a;
}

// Every thread gets the block's combined pair. Uses 33 slots of `scratch`.
__device__ __forceinline__ MaxSum block_reduce(MaxSum a, MaxSum* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  a = warp_reduce(a);
  if (lane == 0) scratch[warp] = a;
  __syncthreads();
  if (warp == 0) {
    MaxSum b = lane < nwarps ? scratch[lane] : MaxSum{-INFINITY, 0.0f};
    b = warp_reduce(b);
    if (lane == 0) scratch[32] = b;
  }
  __syncthreads();
  return scratch[32];
}

template <typename T, int VEC>
__device__ __forceinline__ int row_shift(const T* row) {
  if constexpr (VEC == 1) return 0;
  return static_cast<int>((reinterpret_cast<std::uintptr_t>(row) % 16) / sizeof(T));
}

// A 16-bit row held as raw slots, 4 registers per 8 elements instead of 8, so more rows fit on an
// SM (block_kernel_min_blocks; the warp kernel's 8-slot rows drop from 128 to 64 registers). As
// floats, a bf16 16384-wide row took 63 registers a thread at 512 threads: 2 blocks, 64 KiB of
// loads in flight per SM, and 2.19 TB/s on an H100 against 3.02 for fp32. The price is a second
// exp per element, exp(x - M) / S recomputed from the raw slot when the row is written. H100, bf16
// 16384x16384: 0.395 ms (2.72 TB/s) against 0.491 as floats; torch.softmax 0.489.
template <typename T, int VEC, int K>
__device__ __forceinline__ void softmax_packed_row_in_registers(const T* __restrict__ xr, T* __restrict__ yr,
                                                                int64_t cols, int t, int stride, MaxSum* scratch,
                                                                bool is_warp) {
  const int shift = row_shift<T, VEC>(xr);
  const int64_t nv = (shift + cols + VEC - 1) / VEC;
  const unsigned neg_inf = float_to_bits<T>(-INFINITY) * 0x10001u;
  uint4 raw[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t j = t + static_cast<int64_t>(k) * stride;
    raw[k] = j < nv ? load_raw_slot<T, VEC>(xr, j * VEC - shift, cols) : make_uint4(neg_inf, neg_inf, neg_inf, neg_inf);
  }
  // One pass: the running (max, sum) is rescaled per slot, so each slot is unpacked once here.
  float m = -INFINITY, s = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    float v[VEC];
    unpack_slot<T, VEC>(raw[k], v);
    float mk = m;
#pragma unroll
    for (int e = 0; e < VEC; ++e) mk = fmaxf(mk, v[e]);
    s *= rescale(m, mk);
#pragma unroll
    for (int e = 0; e < VEC; ++e) s += exp_shift(v[e], mk);
    m = mk;
  }
  // Opaque to the compiler from here: the write phase unpacks the slots again instead of keeping
  // the unpacked floats alive across the reduction (which would cost the registers saved).
#pragma unroll
  for (int k = 0; k < K; ++k) asm volatile("" : "+r"(raw[k].x), "+r"(raw[k].y), "+r"(raw[k].z), "+r"(raw[k].w));
  const MaxSum total = is_warp ? warp_reduce(MaxSum{m, s}) : block_reduce(MaxSum{m, s}, scratch);
  const float inv = 1.0f / total.s;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t j = t + static_cast<int64_t>(k) * stride;
    if (j < nv) {
      float v[VEC];
      unpack_slot<T, VEC>(raw[k], v);
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[e] = exp_shift(v[e], total.m) * inv;
      store_slot<T, VEC>(yr, j * VEC - shift, cols, v);
    }
  }
}

// ---- register-resident rows: one warp (STRIDE = 32) or one block (STRIDE = blockDim) per row ----
// Thread t owns vector slots t, t + STRIDE, ..., K of them. Its own pair (m_t, s_t) turns the slot
// values into exp(x - m_t); after the reduction the output is exp(x - m_t) * exp(m_t - M) / S.
// 16-bit rows stay packed instead (softmax_packed_row_in_registers, above).
template <typename T, int VEC, int K>
__device__ __forceinline__ void softmax_row_in_registers(const T* __restrict__ xr, T* __restrict__ yr, int64_t cols,
                                                         int t, int stride, MaxSum* scratch, bool is_warp) {
  if constexpr (sizeof(T) == 2 && VEC > 1) {
    softmax_packed_row_in_registers<T, VEC, K>(xr, yr, cols, t, stride, scratch, is_warp);
    return;
  }
  const int shift = row_shift<T, VEC>(xr);
  const int64_t nv = (shift + cols + VEC - 1) / VEC;
  float v[K][VEC];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t j = t + static_cast<int64_t>(k) * stride;
    if (j < nv) {
      load_slot<T, VEC>(xr, j * VEC - shift, cols, v[k]);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[k][e] = -INFINITY;
    }
  }
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e) m = fmaxf(m, v[k][e]);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      v[k][e] = exp_shift(v[k][e], m);
      s += v[k][e];
    }
  const MaxSum total = is_warp ? warp_reduce(MaxSum{m, s}) : block_reduce(MaxSum{m, s}, scratch);
  const float scale = rescale(m, total.m) / total.s;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t j = t + static_cast<int64_t>(k) * stride;
    if (j < nv) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[k][e] *= scale;
      store_slot<T, VEC>(yr, j * VEC - shift, cols, v[k]);
    }
  }
}

constexpr int kWarpKernelThreads = 128;  // 4 rows per block
constexpr int kBlockKernelThreads = 512;  // the most; packed 16-bit rows take fewer (block_threads)
constexpr int kClusterKernelThreads = 1024;
constexpr int kClusterUnroll = 4;

template <typename T, int VEC, int K>
__global__ void __launch_bounds__(kWarpKernelThreads) softmax_warp_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                          int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kWarpKernelThreads / 32) + (threadIdx.x >> 5);
  if (row >= rows) return;
  softmax_row_in_registers<T, VEC, K>(x + row * cols, y + row * cols, cols, threadIdx.x & 31, 32, nullptr, true);
}

// Packed 16-bit rows of up to 4 slots a thread: 1536 threads per SM (3 blocks of 512, 6 of 256,
// 12 of 128; at most 42 registers a thread; ptxas for sm_90a: 40, no spills; unbounded it takes 72,
// i.e. one block of 512 per SM), 96 KiB of loads in flight per SM where the float-held row allowed
// 64. At 2048 threads (32 registers) it spills.
template <typename T, int K, int THREADS>
constexpr int block_kernel_min_blocks() {
  return sizeof(T) == 2 && K <= 4 ? 1536 / THREADS : 1;
}

template <typename T, int VEC, int K, int THREADS>
__global__ void __launch_bounds__(THREADS, block_kernel_min_blocks<T, K, THREADS>())
    softmax_block_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t cols) {
  __shared__ MaxSum scratch[33];
  const int64_t row = blockIdx.x;
  softmax_row_in_registers<T, VEC, K>(x + row * cols, y + row * cols, cols, threadIdx.x, THREADS, scratch, false);
}

// ---- streaming rows: a cluster of C blocks per row (C = 1 is a plain block per row) ----
template <typename T, int VEC>
__global__ void __launch_bounds__(kClusterKernelThreads) softmax_cluster_kernel(const T* __restrict__ x,
                                                                                T* __restrict__ y, int64_t cols) {
  __shared__ MaxSum scratch[33];
  __shared__ MaxSum partial;  // this block's pair, read by the other blocks of the cluster
  __shared__ MaxSum total;
  cg::cluster_group cluster = cg::this_cluster();
  const int csize = static_cast<int>(cluster.num_blocks());
  const int crank = static_cast<int>(cluster.block_rank());
  const int64_t row = blockIdx.x / csize;
  const T* __restrict__ xr = x + row * cols;
  T* __restrict__ yr = y + row * cols;
  const int shift = row_shift<T, VEC>(xr);
  const int64_t nv = (shift + cols + VEC - 1) / VEC;
  const int64_t per = (nv + csize - 1) / csize;
  const int64_t jbeg = crank * per;
  const int64_t jend = jbeg + per < nv ? jbeg + per : nv;
  constexpr int kStep = kClusterKernelThreads * kClusterUnroll;

  // Phase 1: online (max, sum of exp) over this block's slice, kClusterUnroll vectors in flight.
  MaxSum acc{-INFINITY, 0.0f};
  for (int64_t j0 = jbeg + threadIdx.x; j0 < jend; j0 += kStep) {
    float v[kClusterUnroll][VEC];
#pragma unroll
    for (int u = 0; u < kClusterUnroll; ++u) {
      const int64_t j = j0 + static_cast<int64_t>(u) * kClusterKernelThreads;
      if (j < jend) {
        load_slot<T, VEC>(xr, j * VEC - shift, cols, v[u]);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[u][e] = -INFINITY;
      }
    }
    float m = acc.m;
#pragma unroll
    for (int u = 0; u < kClusterUnroll; ++u)
#pragma unroll
      for (int e = 0; e < VEC; ++e) m = fmaxf(m, v[u][e]);
    float s = acc.s * rescale(acc.m, m);
#pragma unroll
    for (int u = 0; u < kClusterUnroll; ++u)
#pragma unroll
      for (int e = 0; e < VEC; ++e) s += exp_shift(v[u][e], m);
    acc = {m, s};
  }
  const MaxSum blk = block_reduce(acc, scratch);

  if (csize > 1) {
    if (threadIdx.x == 0) partial = blk;
    cluster.sync();  // every block's `partial` is written and visible cluster-wide
    if (threadIdx.x < 32) {
      MaxSum p = static_cast<int>(threadIdx.x) < csize ? *cluster.map_shared_rank(&partial, threadIdx.x)
                                                        : MaxSum{-INFINITY, 0.0f};
      p = warp_reduce(p);
      if (threadIdx.x == 0) total = p;
    }
    cluster.barrier_arrive();  // done reading the others' shared memory; waited for before exit
    __syncthreads();
  }
  const MaxSum row_total = csize > 1 ? total : blk;
  const float M = row_total.m;
  const float inv = 1.0f / row_total.s;

  // Phase 2: write exp(x - M) / S over the slice (a re-read, mostly from L2).
  for (int64_t j0 = jbeg + threadIdx.x; j0 < jend; j0 += kStep) {
    float v[kClusterUnroll][VEC];
#pragma unroll
    for (int u = 0; u < kClusterUnroll; ++u) {
      const int64_t j = j0 + static_cast<int64_t>(u) * kClusterKernelThreads;
      if (j < jend) load_slot<T, VEC>(xr, j * VEC - shift, cols, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kClusterUnroll; ++u) {
      const int64_t j = j0 + static_cast<int64_t>(u) * kClusterKernelThreads;
      if (j < jend) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[u][e] = exp_shift(v[u][e], M) * inv;
        store_slot<T, VEC>(yr, j * VEC - shift, cols, v[u]);
      }
    }
  }
  if (csize > 1) cluster.barrier_wait();  // keep `partial` alive until every block has read it
}

// ---- host-side dispatch (plain CUDA) ----
inline int sm_count() {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return sms > 0 ? sms : 1;
}

inline int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Per instantiation, once: allow clusters of 16 (non-portable, Hopper has them) and record how
// many clusters of 2, 4, 8, 16 blocks can be resident at once (-1: not launchable).
template <typename T, int VEC>
const int* cluster_residency() {
  static int max_active[17] = {};
  static bool probed = false;
  if (!probed) {
    auto kernel = softmax_cluster_kernel<T, VEC>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    for (int c = 2; c <= 16; c *= 2) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(c, 1, 1);
      cfg.blockDim = dim3(kClusterKernelThreads, 1, 1);
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = c;
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int n = 0;
      max_active[c] = cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) == cudaSuccess ? n : -1;
    }
    cudaGetLastError();  // clear anything the probing left behind
    probed = true;
  }
  return max_active;
}

// Largest cluster size (16, 8, 4, 2) of which `rows` clusters can be resident at once, capped so
// that rows * C stays within about two blocks per multiprocessor; 1 when rows alone fill the GPU.
template <typename T, int VEC>
int pick_cluster(int64_t rows, int sms) {
  const int* max_active = cluster_residency<T, VEC>();
  for (int c = 16; c >= 2; c /= 2) {
    if (rows * c <= 2 * static_cast<int64_t>(sms) && max_active[c] >= rows) return c;
  }
  return 1;
}

template <typename T, int VEC>
cudaError_t launch_cluster(const T* x, T* y, int64_t rows, int64_t cols, int csize, cudaStream_t stream) {
  if (rows * csize > 0x7fffffff) return cudaErrorInvalidConfiguration;
  cluster_residency<T, VEC>();  // sets the attribute that clusters of 16 need
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(rows * csize), 1, 1);
  cfg.blockDim = dim3(kClusterKernelThreads, 1, 1);
  cfg.stream = stream;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = csize;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, softmax_cluster_kernel<T, VEC>, x, y, cols);
  const cudaError_t last = cudaGetLastError();  // also clears a launch error, so torch does not meet it later
  return err != cudaSuccess ? err : last;
}

template <typename T, int VEC, int K>
cudaError_t launch_warp(const T* x, T* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kWarpKernelThreads / 32;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  softmax_warp_kernel<T, VEC, K><<<static_cast<unsigned>(blocks), kWarpKernelThreads, 0, stream>>>(x, y, rows, cols);
  return cudaGetLastError();
}

template <typename T, int VEC, int K, int THREADS>
cudaError_t launch_block(const T* x, T* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows > 0x7fffffff) return cudaErrorInvalidConfiguration;
  softmax_block_kernel<T, VEC, K, THREADS><<<static_cast<unsigned>(rows), THREADS, 0, stream>>>(x, y, cols);
  return cudaGetLastError();
}

// Threads of a row's block. A packed 16-bit row takes up to 4 slots a thread, so a block of 512
// holds rows of up to 2048 slots (bf16 16384); a shorter row gets a smaller block rather than
// fewer slots a thread: a bf16 4096-wide row (512 slots) as 512 threads x 1 slot had 24 KiB of
// loads in flight per SM and took 37.6 us on an H100 (57% of copy bandwidth; Triton 23.8 us); as
// 128 threads x 4 slots, 28.7 us (torch.softmax 56 us).
template <typename T, int VEC>
int block_threads(int64_t nv) {
  if (sizeof(T) != 2 || VEC == 1) return kBlockKernelThreads;
  return nv <= 4 * 128 ? 128 : nv <= 4 * 256 ? 256 : kBlockKernelThreads;
}

// Slots a thread: K = 1, 2, 4 or 8. Only the reachable kernels are instantiated: 8 only in blocks of
// 512 (smaller blocks are for short rows), and a 16-bit row takes 256 or 512 threads only when it
// needs more than 2 slots a thread (block_threads).
template <typename T, int VEC, int THREADS>
cudaError_t launch_block_sized(const T* x, T* y, int64_t rows, int64_t cols, int64_t nv, cudaStream_t stream) {
  constexpr bool kFewSlots = sizeof(T) != 2 || THREADS == 128;
  switch (next_pow2((nv + THREADS - 1) / THREADS)) {
    case 1:
      if constexpr (kFewSlots) return launch_block<T, VEC, 1, THREADS>(x, y, rows, cols, stream);
      break;
    case 2:
      if constexpr (kFewSlots) return launch_block<T, VEC, 2, THREADS>(x, y, rows, cols, stream);
      break;
    case 4: return launch_block<T, VEC, 4, THREADS>(x, y, rows, cols, stream);
    default:
      if constexpr (THREADS == kBlockKernelThreads) return launch_block<T, VEC, 8, THREADS>(x, y, rows, cols, stream);
      break;
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t launch_typed(const void* xp, void* yp, int64_t rows, int64_t cols, Path path, int cluster,
                         cudaStream_t stream) {
  const T* x = static_cast<const T*>(xp);
  T* y = static_cast<T*>(yp);
  constexpr int kVec = 16 / sizeof(T);
  const int sms = sm_count();
  const auto xa = reinterpret_cast<std::uintptr_t>(x) % 16;
  const auto ya = reinterpret_cast<std::uintptr_t>(y) % 16;
  if (xa != ya) {  // input and output rows misaligned differently: scalar slots, streaming kernel
    const int c = cluster > 0 ? cluster : pick_cluster<T, 1>(rows, sms);
    return launch_cluster<T, 1>(x, y, rows, cols, c, stream);
  }
  // Vector slots per row; one more when rows can start off a 16-byte boundary.
  const bool aligned_rows = xa == 0 && (cols * static_cast<int64_t>(sizeof(T))) % 16 == 0;
  const int64_t nv = aligned_rows ? cols / kVec : (cols + 2 * kVec - 2) / kVec;
  if (path == Path::kAuto) {
    // Short rows: a warp each. Few rows (fewer than half the SMs would get one): a cluster each,
    // so the row is spread over up to 16 SMs. Otherwise a block each while the row fits in its
    // registers, else the streaming kernel.
    if (nv <= 32 * 8) path = Path::kWarp;
    else if (2 * rows < sms) path = Path::kCluster;
    else if (nv <= kBlockKernelThreads * 8) path = Path::kBlock;
    else path = Path::kCluster;
  }
  if (path == Path::kWarp) {
    if (nv > 32 * 8) return cudaErrorInvalidValue;
    switch (next_pow2((nv + 31) / 32)) {
      case 1: return launch_warp<T, kVec, 1>(x, y, rows, cols, stream);
      case 2: return launch_warp<T, kVec, 2>(x, y, rows, cols, stream);
      case 4: return launch_warp<T, kVec, 4>(x, y, rows, cols, stream);
      default: return launch_warp<T, kVec, 8>(x, y, rows, cols, stream);
    }
  }
  if (path == Path::kBlock) {
    if (nv > kBlockKernelThreads * 8) return cudaErrorInvalidValue;
    if constexpr (sizeof(T) == 2) {
      switch (block_threads<T, kVec>(nv)) {
        case 128: return launch_block_sized<T, kVec, 128>(x, y, rows, cols, nv, stream);
        case 256: return launch_block_sized<T, kVec, 256>(x, y, rows, cols, nv, stream);
        default: break;
      }
    }
    return launch_block_sized<T, kVec, kBlockKernelThreads>(x, y, rows, cols, nv, stream);
  }
  const int c = cluster > 0 ? cluster : pick_cluster<T, kVec>(rows, sms);
  return launch_cluster<T, kVec>(x, y, rows, cols, c, stream);
}

// The one entry point the wrapper calls; instantiates every kernel in both compiler passes.
// path: 0 auto, 1 warp, 2 block, 3 cluster; cluster: blocks per row for the cluster kernel (0: auto).
cudaError_t launch(DType dtype, const void* x, void* y, int64_t rows, int64_t cols, int path, int cluster,
                   cudaStream_t stream) {
  const Path p = static_cast<Path>(path);
  switch (dtype) {
    case DType::kFloat32: return launch_typed<float>(x, y, rows, cols, p, cluster, stream);
    case DType::kBFloat16: return launch_typed<__nv_bfloat16>(x, y, rows, cols, p, cluster, stream);
    case DType::kFloat16: return launch_typed<__half>(x, y, rows, cols, p, cluster, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace gpuperf_softmax

#if !defined(__CUDA_ARCH__) && !defined(GPUPERF_KERNELS_ONLY)  // host pass only: torch and pybind11 (common.cuh)

namespace gpuperf_softmax {

at::Tensor softmax(const at::Tensor& x, int64_t path, int64_t cluster) {
  TORCH_CHECK(x.is_cuda(), "expected a CUDA tensor, got one on ", x.device());
  TORCH_CHECK(x.dim() >= 1, "softmax needs at least one dimension");
  TORCH_CHECK(path >= 0 && path <= 3, "path must be 0 (auto), 1 (warp), 2 (block) or 3 (cluster)");
  TORCH_CHECK(cluster == 0 || cluster == 1 || cluster == 2 || cluster == 4 || cluster == 8 || cluster == 16,
              "cluster must be 0 (auto), 1, 2, 4, 8 or 16");
  const DType dtype = gpuperf_common::dtype_of(x);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in, at::MemoryFormat::Contiguous);
  const int64_t cols = in.size(-1);
  if (in.numel() == 0) return out;
  const int64_t rows = in.numel() / cols;
  const cudaError_t err = launch(dtype, in.data_ptr(), out.data_ptr(), rows, cols, static_cast<int>(path),
                                 static_cast<int>(cluster), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "softmax kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

}  // namespace gpuperf_softmax

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  m.def("softmax", &gpuperf_softmax::softmax, "softmax over the last dimension (fp32 math)", py::arg("x"),
        py::arg("path") = 0, py::arg("cluster") = 0);
}
#endif  // !__CUDA_ARCH__ && !GPUPERF_KERNELS_ONLY
