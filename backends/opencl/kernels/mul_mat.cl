// mul_mat: d[i, j] = dot(a row i, b row j) per matrix, a broadcast over b's
// dims 2-3. The fast kernels (one per type of a, b with contiguous rows)
// work on one row of a and up to MM_NC rows of b: the row of a is decoded
// once, in registers, for all of them. For f32/f16/bf16 one work-item does
// the whole row; for quantized types a work-group shares it (below).
// k_mul_mat_any handles any layout of b, one dot product per work-item.
#define MM_NC 4

#define MM_PROLOGUE                                                                \
  const long i = get_global_id(0), jb = get_global_id(1) * MM_NC, z = get_global_id(2); \
  if (i >= a_ne.y) return;                                                         \
  const long j2 = z % b_ne.z, j3 = z / b_ne.z;                                     \
  global const char* arow = ROW(a, i, j2 / (b_ne.z / a_ne.z), j3 / (b_ne.w / a_ne.w)); \
  const int nc = (int)min((long)MM_NC, b_ne.y - jb);                               \
  global const float* b0 = (global const float*)ROW(b, jb, j2, j3);                \
  const long bs = (long)(b_nb.y / 4);                                              \
  float16 acc[MM_NC];  /* per-lane sums, reduced once at the end */            \
  for (int c = 0; c < MM_NC; ++c) acc[c] = (float16)(0.0f);                       \
  const long K = a_ne.x

#define MM_EPILOGUE \
  for (int c = 0; c < nc; ++c) *(global float*)(ROW(d, jb + c, j2, j3) + i * d_nb.x) = hsum16(acc[c]) + tail[c]

// Adds av * (16 floats of b at element k) for every column.
#define MM_DOT16(av, k)                         \
  for (int c = 0; c < MM_NC; ++c)               \
    if (c < nc) acc[c] += (av) * vload16(0, b0 + c * bs + (k))

kernel void k_mul_mat_f32(TENSOR(a), TENSOR(b), TENSOR(d)) {
  MM_PROLOGUE;
  global const float* ap = (global const float*)arow;
  long k = 0;
  for (; k + 16 <= K; k += 16) {
    const float16 av = vload16(0, ap + k);
    MM_DOT16(av, k);
  }
  float tail[MM_NC] = {0.0f};
  for (; k < K; ++k)
    for (int c = 0; c < nc; ++c) tail[c] += ap[k] * b0[c * bs + k];
  MM_EPILOGUE;
}

kernel void k_mul_mat_f16(TENSOR(a), TENSOR(b), TENSOR(d)) {
  MM_PROLOGUE;
  global const half* ap = (global const half*)arow;
  long k = 0;
  for (; k + 16 <= K; k += 16) {
    const float16 av = vload_half16(0, ap + k);
    MM_DOT16(av, k);
  }
  float tail[MM_NC] = {0.0f};
  for (; k < K; ++k)
    for (int c = 0; c < nc; ++c) tail[c] += vload_half(0, ap + k) * b0[c * bs + k];
  MM_EPILOGUE;
}

kernel void k_mul_mat_bf16(TENSOR(a), TENSOR(b), TENSOR(d)) {
  MM_PROLOGUE;
  global const ushort* ap = (global const ushort*)arow;
  long k = 0;
  for (; k + 16 <= K; k += 16) {
    const float16 av = as_float16(convert_uint16(vload16(0, ap + k)) << 16);
    MM_DOT16(av, k);
  }
  float tail[MM_NC] = {0.0f};
  for (; k < K; ++k)
    for (int c = 0; c < nc; ++c) tail[c] += as_float((uint)ap[k] << 16) * b0[c * bs + k];
  MM_EPILOGUE;
}

// Quantized a: `lanes` work-items share one row of a (and MM_NC rows of b):
// lane l decodes chunks l, l + lanes, ... (32 elements each, dq_<type> in
// quants.cl) into registers and multiplies them with the same elements of
// every column; the lanes' sums meet in local memory. A work-group of G
// work-items (G <= MM_WG, lanes a power of two dividing G) covers G / lanes
// rows. A GPU wants many lanes (reads of neighbouring blocks coalesce); a
// CPU device wants one (each work-item a whole row, no reduction). Launched
// over (ceil(a.ne1 / (G / lanes)) * G, ceil(b.ne1 / MM_NC), b.ne2 * b.ne3)
// with local size (G, 1, 1).
#define MM_WG 64

#define MUL_MAT_Q(T)                                                                                  \
  kernel void k_mul_mat_##T(TENSOR(a), TENSOR(b), TENSOR(d), int lanes) {                            \
    local float partial[MM_NC * MM_WG];                                                              \
    const int lid = (int)get_local_id(0), l = lid % lanes;                                           \
    const long i = get_group_id(0) * (get_local_size(0) / lanes) + lid / lanes;                      \
    const long jb = get_global_id(1) * MM_NC, z = get_global_id(2);                                  \
    const long j2 = z % b_ne.z, j3 = z / b_ne.z;                                                     \
    const int nc = i < a_ne.y ? (int)min((long)MM_NC, b_ne.y - jb) : 0; /* 0: past the last row */   \
    qptr arow = (qptr)ROW(a, i, j2 / (b_ne.z / a_ne.z), j3 / (b_ne.w / a_ne.w));                     \
    global const float* b0 = (global const float*)ROW(b, jb, j2, j3);                                \
    const long bs = (long)(b_nb.y / 4);                                                              \
    float16 acc[MM_NC];                                                                              \
    for (int c = 0; c < MM_NC; ++c) acc[c] = (float16)(0.0f);                                        \
    for (long kc = l; nc > 0 && kc < a_ne.x / 32; kc += lanes) {                                     \
      float16 lo, hi;                                                                                \
      dq_##T(arow, kc, &lo, &hi);                                                                    \
      for (int c = 0; c < MM_NC; ++c) {                                                              \
        if (c < nc) {                                                                                \
          global const float* bp = b0 + c * bs + kc * 32;                                           \
          acc[c] += lo * vload16(0, bp) + hi * vload16(1, bp);                                       \
        }                                                                                            \
      }                                                                                              \
    }                                                                                                \
    float sum[MM_NC];                                                                                \
    for (int c = 0; c < MM_NC; ++c) sum[c] = hsum16(acc[c]);                                         \
    if (lanes > 1) {                                                                                 \
      for (int c = 0; c < MM_NC; ++c) partial[c * MM_WG + lid] = sum[c];                             \
      for (int w = lanes / 2; w > 0; w /= 2) {                                                       \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                \
        if (l < w)                                                                                   \
          for (int c = 0; c < MM_NC; ++c) partial[c * MM_WG + lid] += partial[c * MM_WG + lid + w];  \
      }                                                                                              \
      for (int c = 0; c < MM_NC; ++c) sum[c] = partial[c * MM_WG + lid];                             \
    }                                                                                                \
    if (l == 0)                                                                                      \
      for (int c = 0; c < nc; ++c) *(global float*)(ROW(d, jb + c, j2, j3) + i * d_nb.x) = sum[c];  \
  }

MUL_MAT_Q(q8_0)
MUL_MAT_Q(q4_0)
MUL_MAT_Q(q4_1)
MUL_MAT_Q(q5_0)
MUL_MAT_Q(q5_1)
MUL_MAT_Q(q2_k)
MUL_MAT_Q(q3_k)
MUL_MAT_Q(q4_k)
MUL_MAT_Q(q5_k)
MUL_MAT_Q(q6_k)
MUL_MAT_Q(iq4_nl)
MUL_MAT_Q(iq4_xs)
MUL_MAT_Q(mxfp4)

// Any type of a, any strides of b: launched over (a.ne1, b.ne1, b.ne2 * b.ne3).
kernel void k_mul_mat_any(TENSOR(a), int a_type, TENSOR(b), TENSOR(d)) {
  const long i = get_global_id(0), j = get_global_id(1), z = get_global_id(2);
  if (i >= a_ne.y) return;
  const long j2 = z % b_ne.z, j3 = z / b_ne.z;
  global const char* arow = ROW(a, i, j2 / (b_ne.z / a_ne.z), j3 / (b_ne.w / a_ne.w));
  global const char* brow = ROW(b, j, j2, j3);
  float sum = 0.0f;
  for (long k = 0; k < a_ne.x; ++k)
    sum += load_elem(arow, a_type, k, a_nb.x) * *(global const float*)(brow + k * b_nb.x);
  *(global float*)(ROW(d, j, j2, j3) + i * d_nb.x) = sum;
}
