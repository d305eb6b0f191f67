// mul_mat_id: d[i, s, t] = dot(row i of expert ids[s, t] of a, b[:, s % b.ne1, t]).
// Launched over (a.ne1, n_used, n_tokens), one dot product per work-item; an
// expert id outside [0, a.ne2) is reported (report_error) and its column is
// left unwritten. Weights: f32, f16, bf16, q8_0, q4_0; b any strides.
inline float mmid_b(global const char* brow, long k, ulong nb0) { return *(global const float*)(brow + k * nb0); }

inline float mmid_dot(global const char* arow, int type, global const char* brow, ulong bnb0, long K) {
  float sum = 0.0f;
  if (type == T_Q8_0 || type == T_Q4_0) {
    const long bytes = type == T_Q8_0 ? Q8_0_BYTES : Q4_0_BYTES;
    for (long kb = 0; kb < K / QK; ++kb) {
      global const uchar* blk = (global const uchar*)arow + kb * bytes;
      const float d = vload_half(0, (global const half*)blk);
      float block = 0.0f;
      for (int j = 0; j < QK; ++j) {
        int q;
        if (type == T_Q8_0) q = ((global const char*)blk)[2 + j];
        else q = (j < QK / 2 ? (blk[2 + j] & 15) : (blk[2 + j - QK / 2] >> 4)) - 8;
        block += (float)q * mmid_b(brow, kb * QK + j, bnb0);
      }
      sum += d * block;
    }
    return sum;
  }
  for (long k = 0; k < K; ++k) {
    float w;
    if (type == T_F32) w = ((global const float*)arow)[k];
    else if (type == T_F16) w = vload_half(k, (global const half*)arow);
    else w = load_bf16(arow + 2 * k);
    sum += w * mmid_b(brow, k, bnb0);
  }
  return sum;
}

kernel void k_mul_mat_id(TENSOR(a), int a_type, TENSOR(b), TENSOR(ids), TENSOR(d), global int* err, int label) {
  const long i = get_global_id(0), s = get_global_id(1), t = get_global_id(2);
  if (i >= a_ne.y) return;
  const int e = *(global const int*)(ROW(ids, t, 0, 0) + s * ids_nb.x);
  if (e < 0 || e >= a_ne.z) {
    report_error(err, label, e);
    return;
  }
  global const char* arow = ROW(a, i, e, 0);
  global const char* brow = ROW(b, s % b_ne.y, t, 0);
  *(global float*)(ROW(d, s, t, 0) + i * d_nb.x) = mmid_dot(arow, a_type, brow, b_nb.x, a_ne.x);
}
