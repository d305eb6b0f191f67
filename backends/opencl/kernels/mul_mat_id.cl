// mul_mat_id: d[i, s, t] = dot(row i of expert ids[s, t] of a, b[:, s % b.ne1, t]).
// Launched over (a.ne1, n_used, n_tokens), one dot product per work-item; an
// expert id outside [0, a.ne2) is reported (report_error) and its column is
// left unwritten. Weights: f32, f16, bf16 and every quantized type; b any strides.
inline float mmid_b(global const char* brow, long k, ulong nb0) { return *(global const float*)(brow + k * nb0); }

inline float mmid_dot(global const char* arow, int type, global const char* brow, ulong bnb0, long K) {
  float sum = 0.0f;
  if (type != T_F32 && type != T_F16 && type != T_BF16) {
    // Every quantized type, one element at a time (quants.cl's decoder).
    const int elems = block_elems(type), bytes = block_bytes(type);
    for (long kb = 0; kb < K / elems; ++kb) {
      qptr blk = (qptr)arow + kb * bytes;
      for (int j = 0; j < elems; ++j) sum += dequantize_elem(type, blk, j) * mmid_b(brow, kb * elems + j, bnb0);
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
