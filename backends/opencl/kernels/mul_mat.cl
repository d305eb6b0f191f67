// mul_mat: d[i, j] = dot(a row i, b row j) per matrix, a broadcast over b's
// dims 2-3. The fast kernels (one per type of a, b with contiguous rows)
// give each work-item one row of a and up to MM_NC rows of b: the row of a
// is decoded once, in registers, for all of them. k_mul_mat_any handles any
// layout of b, one dot product per work-item.
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

kernel void k_mul_mat_q8_0(TENSOR(a), TENSOR(b), TENSOR(d)) {
  MM_PROLOGUE;
  const float tail[MM_NC] = {0.0f};
  for (long kb = 0; kb < K / QK; ++kb) {
    global const char* blk = arow + kb * Q8_0_BYTES;
    const float scale = vload_half(0, (global const half*)blk);
    const float16 lo = convert_float16(vload16(0, blk + 2));
    const float16 hi = convert_float16(vload16(1, blk + 2));
    for (int c = 0; c < MM_NC; ++c) {
      if (c < nc) {
        global const float* bp = b0 + c * bs + kb * QK;
        acc[c] += scale * (lo * vload16(0, bp) + hi * vload16(1, bp));
      }
    }
  }
  MM_EPILOGUE;
}

kernel void k_mul_mat_q4_0(TENSOR(a), TENSOR(b), TENSOR(d)) {
  MM_PROLOGUE;
  const float tail[MM_NC] = {0.0f};
  for (long kb = 0; kb < K / QK; ++kb) {
    global const uchar* blk = (global const uchar*)arow + kb * Q4_0_BYTES;
    const float scale = vload_half(0, (global const half*)blk);
    const uchar16 q = vload16(0, blk + 2);
    const float16 lo = convert_float16(q & (uchar16)15) - 8.0f;
    const float16 hi = convert_float16(q >> (uchar16)4) - 8.0f;
    for (int c = 0; c < MM_NC; ++c) {
      if (c < nc) {
        global const float* bp = b0 + c * bs + kb * QK;
        acc[c] += scale * (lo * vload16(0, bp) + hi * vload16(1, bp));
      }
    }
  }
  MM_EPILOGUE;
}

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
