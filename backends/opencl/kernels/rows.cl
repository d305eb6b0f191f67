// Row-wise kernels: one work-item per row, launched over the padded row
// count n. Rows are addressed through strides, so views work.
#define ROW_INDEX(t)                                                    \
  const long r = get_global_id(0);                                      \
  if (r >= t##_ne.y * t##_ne.z * t##_ne.w) return;                      \
  const long i1 = r % t##_ne.y, i2 = r / t##_ne.y % t##_ne.z, i3 = r / (t##_ne.y * t##_ne.z)

kernel void k_sum_rows(TENSOR(a), TENSOR(d)) {
  ROW_INDEX(a);
  global const char* in = ROW(a, i1, i2, i3);
  float sum = 0.0f, c = 0.0f;  // Kahan: close to the CPU's double sum
  for (long i = 0; i < a_ne.x; ++i) {
    const float y = *(global const float*)(in + i * a_nb.x) - c;
    const float t = sum + y;
    c = (t - sum) - y;
    sum = t;
  }
  *(global float*)ROW(d, i1, i2, i3) = sum;
}

kernel void k_argmax(TENSOR(a), TENSOR(d)) {
  ROW_INDEX(a);
  global const char* in = ROW(a, i1, i2, i3);
  int best = 0;
  float best_value = -INFINITY;
  for (long i = 0; i < a_ne.x; ++i) {
    const float v = *(global const float*)(in + i * a_nb.x);
    if (v > best_value) {
      best_value = v;
      best = (int)i;
    }
  }
  *(global int*)(d_p + d_off + r * d_nb.x) = best;
}

// rms != 0: x / sqrt(mean(x^2) + eps); else (x - mean) / sqrt(var + eps).
kernel void k_norm(TENSOR(a), TENSOR(d), int rms, float eps) {
  ROW_INDEX(a);
  global const char* in = ROW(a, i1, i2, i3);
  global char* out = ROW(d, i1, i2, i3);
  const long n = a_ne.x;
  float mean = 0.0f;
  if (!rms) {
    float sum = 0.0f, c = 0.0f;
    for (long i = 0; i < n; ++i) {
      const float y = *(global const float*)(in + i * a_nb.x) - c;
      const float t = sum + y;
      c = (t - sum) - y;
      sum = t;
    }
    mean = sum / (float)n;
  }
  float sum_sq = 0.0f, c = 0.0f;
  for (long i = 0; i < n; ++i) {
    const float x = *(global const float*)(in + i * a_nb.x) - mean;
    const float y = x * x - c;
    const float t = sum_sq + y;
    c = (t - sum_sq) - y;
    sum_sq = t;
  }
  const float s = 1.0f / sqrt(sum_sq / (float)n + eps);
  for (long i = 0; i < n; ++i) {
    const float x = *(global const float*)(in + i * a_nb.x);
    *(global float*)(out + i * d_nb.x) = (x - mean) * s;
  }
}

// softmax(a * scale + mask) along dim 0; the mask (F32 or F16, contiguous
// rows) repeats over dims 2-3. A row that is masked entirely becomes zeros.
// s (has_sinks): one more logit per head (dim 2), in the max and the sum only.
kernel void k_soft_max(TENSOR(a), TENSOR(m), TENSOR(s), TENSOR(d), int mask_type, int has_sinks, float scale) {
  ROW_INDEX(a);
  global const char* in = ROW(a, i1, i2, i3);
  global char* out = ROW(d, i1, i2, i3);
  global const char* mrow = mask_type >= 0 ? ROW(m, i1, i2 % m_ne.z, i3 % m_ne.w) : 0;
  const long n = a_ne.x;
  float max = -INFINITY;
  for (long i = 0; i < n; ++i) {
    float x = *(global const float*)(in + i * a_nb.x) * scale;
    if (mask_type >= 0) x += load_elem(mrow, mask_type, i, m_nb.x);
    max = fmax(max, x);
  }
  const float sink = has_sinks ? *(global const float*)(s_p + s_off + i2 * s_nb.x) : -INFINITY;
  max = fmax(max, sink);
  if (max == -INFINITY) {
    for (long i = 0; i < n; ++i) *(global float*)(out + i * d_nb.x) = 0.0f;
    return;
  }
  float sum = has_sinks ? exp(sink - max) : 0.0f, c = 0.0f;
  for (long i = 0; i < n; ++i) {
    float x = *(global const float*)(in + i * a_nb.x) * scale;
    if (mask_type >= 0) x += load_elem(mrow, mask_type, i, m_nb.x);
    const float e = exp(x - max);
    *(global float*)(out + i * d_nb.x) = e;
    const float y = e - c;
    const float t = sum + y;
    c = (t - sum) - y;
    sum = t;
  }
  const float inv = 1.0f / sum;
  for (long i = 0; i < n; ++i) *(global float*)(out + i * d_nb.x) *= inv;
}

// Launched over (pairs + passed-through elements, rows): work-item k below
// n_dims / 2 rotates one pair, the others copy one element past n_dims.
// With has_ff, pair k's frequency is divided by ff[k] (freq factors); the
// rotated pairs are scaled by mscale (the rope attention factor).
kernel void k_rope(TENSOR(a), TENSOR(pos), TENSOR(ff), TENSOR(d), int n_dims, int neox, int has_ff, float base,
                   float freq_scale, float mscale) {
  const long k = get_global_id(0);
  const long r = get_global_id(1);
  const int half_dims = n_dims / 2;
  if (k >= half_dims + (a_ne.x - n_dims)) return;
  const long i1 = r % a_ne.y, i2 = r / a_ne.y % a_ne.z, i3 = r / (a_ne.y * a_ne.z);
  global const char* in = ROW(a, i1, i2, i3);
  global char* out = ROW(d, i1, i2, i3);
  if (k >= half_dims) {
    const long j = n_dims + (k - half_dims);
    *(global float*)(out + j * d_nb.x) = *(global const float*)(in + j * a_nb.x);
    return;
  }
  const int position = *(global const int*)(pos_p + pos_off + i2 * pos_nb.x);
  float inv_freq = pow(base, -2.0f * (float)k / (float)n_dims);
  if (has_ff) inv_freq /= *(global const float*)(ff_p + ff_off + k * ff_nb.x);
  const float theta = freq_scale * (float)position * inv_freq;
  const float c = cos(theta) * mscale, s = sin(theta) * mscale;
  const long j0 = neox ? k : 2 * k;
  const long j1 = neox ? k + half_dims : 2 * k + 1;
  const float x0 = *(global const float*)(in + j0 * a_nb.x);
  const float x1 = *(global const float*)(in + j1 * a_nb.x);
  *(global float*)(out + j0 * d_nb.x) = x0 * c - x1 * s;
  *(global float*)(out + j1 * d_nb.x) = x0 * s + x1 * c;
}
