// flash_attn_ext (loom/ops.h): one work-group of FA_WG work-items per query
// row, head and batch, an online softmax over tiles of FA_WG KV rows.
// Work-item t scores row j0 + t (q from local memory; K of any type through
// load_elem), the group reduces the tile's max, rescales, and each work-item
// accumulates V for the output elements i = lid, lid + FA_WG, ... (at most
// FA_PER_ITEM of them). The logits never leave local memory.
#define FA_WG 64
#define FA_PER_ITEM 8

inline float fa_reduce_max(local float* red, float x, int lid) {
  red[lid] = x;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = FA_WG / 2; s > 0; s >>= 1) {
    if (lid < s) red[lid] = fmax(red[lid], red[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// Global sizes: (FA_WG, n_q * n_head, ne3). slope: the head's ALiBi slope
// (1 without ALiBi), computed by the kernel from max_bias as llama.cpp does.
kernel void k_flash_attn(TENSOR(q), TENSOR(k), int k_type, TENSOR(v), int v_type, TENSOR(m), int mask_type,
                         TENSOR(d), float scale, float max_bias, float softcap) {
  local float qs[512];
  local float p[FA_WG];
  local float red[FA_WG];
  const int lid = get_local_id(0);
  const long rh = get_global_id(1), b = get_global_id(2);
  const long H = q_ne.z, r = rh / H, h = rh % H;
  const long D = q_ne.x, Dv = v_ne.x, n_kv = k_ne.y;
  const long hk = h / (H / k_ne.z), bk = b / (q_ne.w / k_ne.w);

  float slope = 1.0f;
  if (max_bias > 0.0f) {
    long n2 = 1;
    while (n2 * 2 <= H) n2 *= 2;
    const float m0 = pow(2.0f, -max_bias / (float)n2), m1 = pow(2.0f, -(max_bias / 2.0f) / (float)n2);
    slope = h < n2 ? pow(m0, (float)(h + 1)) : pow(m1, (float)(2 * (h - n2) + 1));
  }
  const bool capped = softcap > 0.0f;
  const float sc = capped ? scale / softcap : scale;

  global const char* qrow = ROW(q, r, h, b);
  for (long i = lid; i < D; i += FA_WG) qs[i] = *(global const float*)(qrow + i * q_nb.x);
  global const char* mrow = mask_type >= 0 ? ROW(m, r, h % m_ne.z, b % m_ne.w) : 0;
  barrier(CLK_LOCAL_MEM_FENCE);

  float acc[FA_PER_ITEM];
  for (int e = 0; e < FA_PER_ITEM; ++e) acc[e] = 0.0f;
  float run_max = -INFINITY, run_sum = 0.0f;
  for (long j0 = 0; j0 < n_kv; j0 += FA_WG) {
    const long j = j0 + lid;
    float s = -INFINITY;
    if (j < n_kv) {
      const float mv = mask_type >= 0 ? load_elem(mrow, mask_type, j, m_nb.x) : 0.0f;
      if (mv != -INFINITY) {
        global const char* krow = ROW(k, j, hk, bk);
        float dot = 0.0f;
        for (long i = 0; i < D; ++i) dot += qs[i] * load_elem(krow, k_type, i, k_nb.x);
        s = dot * sc;
        if (capped) s = softcap * tanh(s);
        s += slope * mv;
      }
    }
    const float tile_max = fa_reduce_max(red, s, lid);
    if (tile_max == -INFINITY) continue;  // the same answer for the whole group
    const float new_max = fmax(run_max, tile_max);
    const float c = run_max == -INFINITY ? 0.0f : exp(run_max - new_max);
    run_max = new_max;
    p[lid] = s == -INFINITY ? 0.0f : exp(s - new_max);
    barrier(CLK_LOCAL_MEM_FENCE);
    const long nt = min((long)FA_WG, n_kv - j0);
    float tile_sum = 0.0f;
    for (long t = 0; t < nt; ++t) tile_sum += p[t];
    run_sum = run_sum * c + tile_sum;
    for (int e = 0; e < FA_PER_ITEM; ++e) {
      const long i = lid + (long)e * FA_WG;
      if (i >= Dv) break;
      float a = acc[e] * c;
      for (long t = 0; t < nt; ++t)
        if (p[t] != 0.0f) a += p[t] * load_elem(ROW(v, j0 + t, hk, bk), v_type, i, v_nb.x);
      acc[e] = a;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // p is rewritten by the next tile
  }
  const float inv = run_sum > 0.0f ? 1.0f / run_sum : 0.0f;
  global char* out = ROW(d, h, r, b);
  for (int e = 0; e < FA_PER_ITEM; ++e) {
    const long i = lid + (long)e * FA_WG;
    if (i >= Dv) break;
    *(global float*)(out + i * d_nb.x) = acc[e] * inv;
  }
}
