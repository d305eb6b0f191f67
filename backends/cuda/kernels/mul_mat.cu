// mul_mat: d[i, j] = dot(row i of a, row j of b) per matrix, a broadcast
// over b's dims 2-3 (loom/ops.h). Two paths:
// - few columns (N <= kMmvMaxCols, token generation): k_mul_mat_vec, one
//   warp per row of a, decoding a on the fly (plain types element by
//   element, quantized types one 32-element chunk per lane) against up to
//   kMmvMaxCols columns of b, reduced by warp_sum. With more columns it runs
//   in groups (the fallback when cuBLAS cannot take a layout).
// - more columns: cuBLAS. a is used in place when cuBLAS can read it (f32,
//   f16, bf16 with element-aligned strides), else converted to f16 in
//   scratch slot 0 (quantized types are dequantized); b is converted to the
//   compute type in slot 1; the product goes straight into the result when
//   its layout allows, else through an f32 temporary (slot 1) and a copy.
//   f32 a multiplies in f32 (no TF32), bf16 in bf16, the rest in f16, all
//   accumulating in f32.
#include <algorithm>

#include "common.cuh"
#include "launchers.h"
#include "quants.cuh"

namespace loom::cuda {
namespace {

constexpr int kMmvMaxCols = 8;  // columns of b per pass of k_mul_mat_vec
constexpr int kMmvWarps = 4;    // rows of a per block
constexpr int64_t kMaxGridY = 65535;

bool is_plain_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

template <DType T>
__device__ __forceinline__ float load_as_float(const char* p) {
  if constexpr (T == DType::F32) return *reinterpret_cast<const float*>(p);
  else if constexpr (T == DType::F16) return load_f16(p);
  else return load_bf16(p);
}

// grid (ceil(M / kMmvWarps), min(groups * mats, kMaxGridY)), block 32 * kMmvWarps.
// Warp w of block x computes row i = x * kMmvWarps + w of a against columns
// [g * kMmvMaxCols, ...) of matrix (j2, j3) of b, for every (g, matrix) the
// block's y visits. Quantized T needs b's rows contiguous and 16-byte aligned
// (b_vec); plain T reads b through its strides.
template <DType T>
__global__ void __launch_bounds__(32 * kMmvWarps)
    k_mul_mat_vec(TensorArg a, TensorArg b, TensorArg d, int64_t groups) {
  constexpr bool kQuant = is_quant_type(static_cast<int>(T));
  const int lane = threadIdx.x % 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kMmvWarps + threadIdx.x / 32;
  if (i >= a.ne[1]) return;  // the whole warp leaves; no block-wide barriers below
  const int64_t K = a.ne[0], N = b.ne[1], B2 = b.ne[2];
  const int64_t r2 = B2 / a.ne[2], r3 = b.ne[3] / a.ne[3];
  const int64_t total = groups * B2 * b.ne[3];
  for (int64_t z = blockIdx.y; z < total; z += gridDim.y) {
    const int64_t g = z % groups, mat = z / groups;
    const int64_t j2 = mat % B2, j3 = mat / B2;
    const int64_t jb = g * kMmvMaxCols;
    const int nc = static_cast<int>(min(static_cast<int64_t>(kMmvMaxCols), N - jb));
    const char* arow = a.row(i, j2 / r2, j3 / r3);
    const char* bcol[kMmvMaxCols];
#pragma unroll
    for (int c = 0; c < kMmvMaxCols; ++c) bcol[c] = b.row(jb + min(c, nc - 1), j2, j3);
    float acc[kMmvMaxCols];
#pragma unroll
    for (int c = 0; c < kMmvMaxCols; ++c) acc[c] = 0.0f;
    if constexpr (kQuant) {
      for (int64_t ch = lane; ch < K / 32; ch += 32) {
        float w[32];
        dequant_row_chunk32<T>(arow, ch, w);
#pragma unroll
        for (int c = 0; c < kMmvMaxCols; ++c) {
          if (c < nc) {
            const float4* bp = reinterpret_cast<const float4*>(bcol[c]) + ch * 8;
            float s = 0.0f;
#pragma unroll
            for (int q = 0; q < 8; ++q) {
              const float4 v = bp[q];
              s += w[4 * q] * v.x + w[4 * q + 1] * v.y + w[4 * q + 2] * v.z + w[4 * q + 3] * v.w;
            }
            acc[c] += s;
          }
        }
      }
    } else {
      constexpr int64_t es = T == DType::F32 ? 4 : 2;
      const int64_t bnb0 = b.nb[0];
      for (int64_t k = lane; k < K; k += 32) {
        const float av = load_as_float<T>(arow + k * es);
#pragma unroll
        for (int c = 0; c < kMmvMaxCols; ++c)
          if (c < nc) acc[c] += av * *reinterpret_cast<const float*>(bcol[c] + k * bnb0);
      }
    }
#pragma unroll
    for (int c = 0; c < kMmvMaxCols; ++c) {
      if (c < nc) {  // nc is the same for the whole warp
        const float s = warp_sum(acc[c]);
        if (lane == 0) *reinterpret_cast<float*>(d.row(jb + c, j2, j3) + i * d.nb[0]) = s;
      }
    }
  }
}

// f32, f16 or bf16 by type id (load_plain without the I32 case).
__device__ __forceinline__ float load_float(const char* p, int type) {
  if (type == static_cast<int>(DType::F32)) return *reinterpret_cast<const float*>(p);
  if (type == static_cast<int>(DType::F16)) return load_f16(p);
  return load_bf16(p);
}

template <class Out>
__device__ __forceinline__ Out from_float(float v) {
  if constexpr (std::is_same_v<Out, float>) return v;
  else if constexpr (std::is_same_v<Out, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

// dst (contiguous, src's shape) = src converted, element by element: src of
// a plain type (f32, f16, bf16) with any strides.
template <class Out>
__global__ void k_pack_plain(TensorArg src, int src_type, Out* dst, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = e;
    const int64_t i0 = r % src.ne[0];
    r /= src.ne[0];
    const int64_t i1 = r % src.ne[1];
    r /= src.ne[1];
    const int64_t i2 = r % src.ne[2];
    const int64_t i3 = r / src.ne[2];
    dst[e] = from_float<Out>(load_float(src.elem(i0, i1, i2, i3), src_type));
  }
}

// dst (f16, contiguous [K, M, A2, A3]) = a dequantized, one 32-element chunk
// per thread.
template <DType T>
__global__ void k_dequant_f16(TensorArg a, __half* dst, int64_t chunks) {
  const int64_t per_row = a.ne[0] / 32;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < chunks;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = e % per_row, r = e / per_row;
    const int64_t i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
    float w[32];
    dequant_row_chunk32<T>(a.row(i1, i2, i3), c, w);
    __half2* out = reinterpret_cast<__half2*>(dst + e * 32);  // 64-byte aligned
#pragma unroll
    for (int j = 0; j < 16; ++j) out[j] = __floats2half2_rn(w[2 * j], w[2 * j + 1]);
  }
}

// d (any strides) = tmp (contiguous f32 of d's shape).
__global__ void k_scatter_f32(const float* tmp, TensorArg d, int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = e;
    const int64_t i0 = r % d.ne[0];
    r /= d.ne[0];
    const int64_t i1 = r % d.ne[1];
    r /= d.ne[1];
    const int64_t i2 = r % d.ne[2];
    const int64_t i3 = r / d.ne[2];
    *reinterpret_cast<float*>(d.elem(i0, i1, i2, i3)) = tmp[e];
  }
}

unsigned grid_for(int64_t total, int block) {
  return static_cast<unsigned>(std::min<int64_t>((total + block - 1) / block, int64_t{1} << 20));
}

// A contiguous TensorArg over `data` with the shape ne and elements of `es` bytes.
TensorArg packed_arg(void* data, const int64_t* ne, int64_t es) {
  TensorArg t{static_cast<char*>(data), {ne[0], ne[1], ne[2], ne[3]}, {}};
  t.nb[0] = es;
  t.nb[1] = es * ne[0];
  t.nb[2] = t.nb[1] * ne[1];
  t.nb[3] = t.nb[2] * ne[2];
  return t;
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

void launch_mul_mat_vec(const Tensor& node, const LaunchContext& ctx) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  TensorArg barg = arg(b);
  const bool quant = is_quant_type(type_id(a.type));
  if (quant) {
    // The kernel reads b's rows as float4: pack b unless it already allows that.
    const bool ok = b.nb[0] == sizeof(float) && aligned16(b.data) && b.nb[1] % 16 == 0 && b.nb[2] % 16 == 0 &&
                    b.nb[3] % 16 == 0;
    if (!ok && b.nelements() > 0) {
      const int64_t total = b.nelements();
      void* tmp = ctx.scratch->get(1, static_cast<size_t>(total) * sizeof(float));
      k_pack_plain<float><<<grid_for(total, 256), 256, 0, ctx.stream>>>(barg, type_id(b.type),
                                                                       static_cast<float*>(tmp), total);
      check(cudaGetLastError(), "launching k_pack_plain (mul_mat b)");
      barg = packed_arg(tmp, b.ne.data(), sizeof(float));
    }
  }
  const int64_t groups = (b.ne[1] + kMmvMaxCols - 1) / kMmvMaxCols;
  const int64_t z = groups * b.ne[2] * b.ne[3];
  const dim3 grid(blocks_for(a.ne[1], kMmvWarps), static_cast<unsigned>(std::min(z, kMaxGridY)));
  const dim3 block(32 * kMmvWarps);
  auto go = [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    k_mul_mat_vec<T><<<grid, block, 0, ctx.stream>>>(arg(a), barg, arg(node), groups);
  };
  if (!dispatch_quant_type(type_id(a.type), go)) {
    switch (a.type) {
      case DType::F32: go(std::integral_constant<DType, DType::F32>{}); break;
      case DType::F16: go(std::integral_constant<DType, DType::F16>{}); break;
      default: go(std::integral_constant<DType, DType::BF16>{}); break;
    }
  }
  check(cudaGetLastError(), "launching k_mul_mat_vec");
}

// One operand of the cuBLAS product: element type, base, leading dimension
// and the element strides between matrices along dims 2 and 3.
struct GemmOperand {
  const void* data = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  int64_t ld = 0, s2 = 0, s3 = 0;
};

size_t elem_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

// Whether t (contiguous rows of element size es) can be read by cuBLAS as it is.
bool gemm_direct(const Tensor& t, size_t es) {
  return t.nb[0] == es && reinterpret_cast<uintptr_t>(t.data) % es == 0 && t.nb[1] % es == 0 && t.nb[2] % es == 0 &&
         t.nb[3] % es == 0 && static_cast<int64_t>(t.nb[1] / es) >= t.ne[0];
}

void launch_mul_mat_gemm(const Tensor& node, const LaunchContext& ctx) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1], A2 = a.ne[2], A3 = a.ne[3], B2 = b.ne[2], B3 = b.ne[3];
  const cudaDataType_t ct = a.type == DType::F32 ? CUDA_R_32F : a.type == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  const size_t es = elem_size(ct);

  // a: in place, or packed into slot 0.
  GemmOperand A{a.data, ct};
  if ((a.type == DType::F32 || a.type == DType::F16 || a.type == DType::BF16) && gemm_direct(a, es)) {
    A.ld = static_cast<int64_t>(a.nb[1] / es);
    A.s2 = static_cast<int64_t>(a.nb[2] / es);
    A.s3 = static_cast<int64_t>(a.nb[3] / es);
  } else {
    const int64_t total = a.nelements();
    void* tmp = ctx.scratch->get(0, static_cast<size_t>(total) * es);
    if (is_quant_type(type_id(a.type))) {
      const int64_t chunks = total / 32;
      dispatch_quant_type(type_id(a.type), [&](auto tag) {
        constexpr DType T = decltype(tag)::value;
        k_dequant_f16<T><<<grid_for(chunks, 256), 256, 0, ctx.stream>>>(arg(a), static_cast<__half*>(tmp), chunks);
      });
      check(cudaGetLastError(), "launching k_dequant_f16 (mul_mat a)");
    } else {
      const unsigned grid = grid_for(total, 256);
      if (ct == CUDA_R_32F)
        k_pack_plain<float><<<grid, 256, 0, ctx.stream>>>(arg(a), type_id(a.type), static_cast<float*>(tmp), total);
      else if (ct == CUDA_R_16BF)
        k_pack_plain<__nv_bfloat16><<<grid, 256, 0, ctx.stream>>>(arg(a), type_id(a.type),
                                                                   static_cast<__nv_bfloat16*>(tmp), total);
      else
        k_pack_plain<__half><<<grid, 256, 0, ctx.stream>>>(arg(a), type_id(a.type), static_cast<__half*>(tmp), total);
      check(cudaGetLastError(), "launching k_pack_plain (mul_mat a)");
    }
    A.data = tmp;
    A.ld = K;
    A.s2 = K * M;
    A.s3 = K * M * A2;
  }

  // b: in place (f32 products only), or packed at the start of slot 1; the
  // f32 temporary for the result, if needed, after it.
  const bool b_direct = ct == CUDA_R_32F && gemm_direct(b, es);
  const bool d_direct = gemm_direct(node, sizeof(float)) && node.ne[0] == M;
  const size_t b_bytes = b_direct ? 0 : align256(static_cast<size_t>(b.nelements()) * es);
  const size_t d_bytes = d_direct ? 0 : static_cast<size_t>(node.nelements()) * sizeof(float);
  char* slot1 = nullptr;
  if (b_bytes + d_bytes > 0) slot1 = static_cast<char*>(ctx.scratch->get(1, b_bytes + d_bytes));

  GemmOperand B{b.data, ct};
  if (b_direct) {
    B.ld = static_cast<int64_t>(b.nb[1] / es);
    B.s2 = static_cast<int64_t>(b.nb[2] / es);
    B.s3 = static_cast<int64_t>(b.nb[3] / es);
  } else {
    const int64_t total = b.nelements();
    const unsigned grid = grid_for(total, 256);
    if (ct == CUDA_R_32F)
      k_pack_plain<float><<<grid, 256, 0, ctx.stream>>>(arg(b), type_id(b.type), reinterpret_cast<float*>(slot1), total);
    else if (ct == CUDA_R_16BF)
      k_pack_plain<__nv_bfloat16><<<grid, 256, 0, ctx.stream>>>(arg(b), type_id(b.type),
                                                                 reinterpret_cast<__nv_bfloat16*>(slot1), total);
    else
      k_pack_plain<__half><<<grid, 256, 0, ctx.stream>>>(arg(b), type_id(b.type), reinterpret_cast<__half*>(slot1),
                                                        total);
    check(cudaGetLastError(), "launching k_pack_plain (mul_mat b)");
    B.data = slot1;
    B.ld = K;
    B.s2 = K * N;
    B.s3 = K * N * B2;
  }

  float* C = d_direct ? static_cast<float*>(node.data) : reinterpret_cast<float*>(slot1 + b_bytes);
  const int64_t ldc = d_direct ? static_cast<int64_t>(node.nb[1] / 4) : M;
  const int64_t c2 = d_direct ? static_cast<int64_t>(node.nb[2] / 4) : M * N;
  const int64_t c3 = d_direct ? static_cast<int64_t>(node.nb[3] / 4) : M * N * B2;

  check(cublas().set_pointer_mode(ctx.cublas, CUBLAS_POINTER_MODE_HOST), "setting cuBLAS pointer mode");
  check(cublas().set_math_mode(ctx.cublas, CUBLAS_DEFAULT_MATH),  // no TF32 for f32; f16/bf16 use tensor cores anyway
        "setting cuBLAS math mode");
  const float alpha = 1.0f, beta = 0.0f;
  const int64_t r2 = B2 / A2, r3 = B3 / A3;
  // Batch i2a of a call multiplies matrix i2a of a with matrix i2a * r2 + o
  // of b (one call per o and i3; no zero strides, whose support varies).
  auto gemm = [&](int64_t a_off, int64_t b_off, int64_t b_stride, int64_t c_off, int64_t c_stride, int64_t batch) {
    const char* ap = static_cast<const char*>(A.data) + a_off * static_cast<int64_t>(es);
    const char* bp = static_cast<const char*>(B.data) + b_off * static_cast<int64_t>(es);
    check(cublas().gemm_strided_batched_ex(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(M),
                                           static_cast<int>(N), static_cast<int>(K), &alpha, ap, A.type,
                                           static_cast<int>(A.ld), A.s2, bp, B.type, static_cast<int>(B.ld), b_stride,
                                           &beta, C + c_off, CUDA_R_32F, static_cast<int>(ldc), c_stride,
                                           static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx (mul_mat)");
  };
  for (int64_t i3 = 0; i3 < B3; ++i3)
    for (int64_t o = 0; o < r2; ++o)
      gemm((i3 / r3) * A.s3, i3 * B.s3 + o * B.s2, r2 * B.s2, i3 * c3 + o * c2, r2 * c2, A2);

  if (!d_direct) {
    const int64_t total = node.nelements();
    k_scatter_f32<<<grid_for(total, 256), 256, 0, ctx.stream>>>(C, arg(node), total);
    check(cudaGetLastError(), "launching k_scatter_f32 (mul_mat result)");
  }
}

}  // namespace

bool supports_mul_mat(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  if (!a || !b) return false;
  return node.type == DType::F32 && b->type == DType::F32 && a->has_contiguous_rows() &&
         (is_plain_float(a->type) || is_quant_type(type_id(a->type)));
}

void launch_mul_mat(const Tensor& node, const LaunchContext& ctx) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  if (node.nelements() == 0) return;
  // cuBLAS takes int sizes and leading dimensions; the mat-vec kernel takes anything.
  constexpr int64_t kIntMax = 2147483647;
  const bool fits_int = a.ne[0] < kIntMax / 4 && a.ne[1] < kIntMax / 4 && b.ne[1] < kIntMax / 4 &&
                        static_cast<int64_t>(a.nb[1]) < kIntMax && static_cast<int64_t>(b.nb[1]) < kIntMax &&
                        static_cast<int64_t>(node.nb[1]) < kIntMax && b.ne[2] / a.ne[2] < kIntMax && b.ne[2] < kIntMax;
  if (b.ne[1] <= kMmvMaxCols || a.ne[0] == 0 || a.ne[1] == 0 || !fits_int) {
    launch_mul_mat_vec(node, ctx);
  } else {
    launch_mul_mat_gemm(node, ctx);
  }
}

}  // namespace loom::cuda
