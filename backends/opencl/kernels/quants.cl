// Block formats of the quantized types (layouts: the block structs in
// include/loom/types.h, bit for bit as in GGUF files). The host defines each
// type's id T_<NAME>, its bytes per block <NAME>_BYTES and elements per block
// <NAME>_ELEMS (kernel_defines() in opencl_ops.cpp).
//
// Three ways in:
// - dequantize_elem: one element of one block (get_rows, cpy, the generic
//   mul_mat kernel);
// - dq_<type>(row, c, &lo, &hi): the 32 elements of chunk c of a row, in two
//   float16 registers (elements 0-15 and 16-31 of the chunk); a 256-element
//   super-block is 8 chunks. The mul_mat kernels decode weights this way.
// - quantize_block: 32 floats into one block of the types a kernel writes
//   (q8_0, q4_0, q4_1, q5_0, q5_1), with the CPU's arithmetic.

// Nibble values of IQ4_NL / IQ4_XS, and of MXFP4 (e2m1 doubled, so that
// 2^(e - 128) scales them): loom::kIq4nlValues and loom::kMxfp4Values.
constant float kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constant float kMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

typedef global const uchar* qptr;

inline float f16_at(qptr p) { return vload_half(0, (global const half*)p); }
// 2^(e - 128): the MXFP4 scale for nibbles from kMxfp4.
inline float mxfp4_scale(uchar e) { return ldexp(1.0f, (int)e - 128); }

#define BLOCK_CASES(F)                                                                                \
  case T_Q8_0: return F(Q8_0);                                                                        \
  case T_Q4_0: return F(Q4_0);                                                                        \
  case T_Q4_1: return F(Q4_1);                                                                        \
  case T_Q5_0: return F(Q5_0);                                                                        \
  case T_Q5_1: return F(Q5_1);                                                                        \
  case T_Q2_K: return F(Q2_K);                                                                        \
  case T_Q3_K: return F(Q3_K);                                                                        \
  case T_Q4_K: return F(Q4_K);                                                                        \
  case T_Q5_K: return F(Q5_K);                                                                        \
  case T_Q6_K: return F(Q6_K);                                                                        \
  case T_IQ4_NL: return F(IQ4_NL);                                                                    \
  case T_IQ4_XS: return F(IQ4_XS);                                                                    \
  default: return F(MXFP4);
#define ELEMS_OF(T) T##_ELEMS
#define BYTES_OF(T) T##_BYTES

// Elements and bytes per block of a quantized type.
inline int block_elems(int type) {
  switch (type) { BLOCK_CASES(ELEMS_OF) }
}
inline int block_bytes(int type) {
  switch (type) { BLOCK_CASES(BYTES_OF) }
}

// ---- one element ------------------------------------------------------------

// Element j (0..31) of 32 stored as nibbles: low nibbles first, then high.
inline int nibble(qptr qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }
// Bit j of a little-endian 32-bit mask stored at p (any alignment).
inline int bit_of(qptr p, int j) { return (p[j / 8] >> (j % 8)) & 1; }

// 6-bit scale and min of sub-block s of Q4_K / Q5_K.
inline int2 scale_min6(qptr scales, int s) {
  if (s < 4) return (int2)(scales[s] & 63, scales[s + 4] & 63);
  return (int2)((scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4, (scales[s + 4] >> 4) | (scales[s] >> 6) << 4);
}

// 6-bit scale (stored + 32) of sub-block s of Q3_K.
inline int scale_q3(qptr scales, int s) {
  const int low = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4;
  return low | ((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
}

// 6-bit scale (stored + 32) of sub-block s of IQ4_XS.
inline int scale_iq4_xs(qptr b, int s) {
  const int high = ((b[2] | b[3] << 8) >> (2 * s)) & 3;
  return ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | high << 4;
}

inline float dequantize_elem(int type, qptr b, int j) {
  switch (type) {
    case T_Q8_0: return f16_at(b) * ((global const char*)b)[2 + j];
    case T_Q4_0: return f16_at(b) * (nibble(b + 2, j) - 8);
    case T_Q4_1: return f16_at(b) * nibble(b + 4, j) + f16_at(b + 2);
    case T_Q5_0: return f16_at(b) * ((nibble(b + 6, j) | bit_of(b + 2, j) << 4) - 16);
    case T_Q5_1: return f16_at(b) * (nibble(b + 8, j) | bit_of(b + 4, j) << 4) + f16_at(b + 2);
    case T_IQ4_NL: return f16_at(b) * kIq4nl[nibble(b + 2, j)];
    case T_MXFP4: return kMxfp4[nibble(b + 1, j)] * mxfp4_scale(b[0]);
    case T_Q2_K: {  // scales[16], qs[64], d, dmin
      const int q = (b[16 + 32 * (j / 128) + j % 32] >> (2 * (j % 128 / 32))) & 3;
      const int sc = b[j / 16];
      return f16_at(b + 80) * (sc & 15) * q - f16_at(b + 82) * (sc >> 4);
    }
    case T_Q3_K: {  // hmask[32], qs[64], scales[12], d
      const int h = j / 128, k = j % 128 / 32, r = j % 32;
      const int low = (b[32 + 32 * h + r] >> (2 * k)) & 3;
      const int high = (b[r] >> (4 * h + k)) & 1;
      return f16_at(b + 108) * (scale_q3(b + 96, j / 16) - 32) * (low + 4 * high - 4);
    }
    case T_Q4_K:    // d, dmin, scales[12], qs[128]
    case T_Q5_K: {  // d, dmin, scales[12], qh[32], qs[128]
      const int c = j / 64, r = j % 64;
      qptr qs = b + (type == T_Q4_K ? 16 : 48);
      int q = r < 32 ? qs[32 * c + r] & 15 : qs[32 * c + r - 32] >> 4;
      if (type == T_Q5_K) q |= ((b[16 + j % 32] >> (j / 32)) & 1) << 4;
      const int2 sm = scale_min6(b + 4, j / 32);
      return f16_at(b) * sm.x * q - f16_at(b + 2) * sm.y;
    }
    case T_Q6_K: {  // ql[128], qh[64], scales[16] (int8), d
      const int h = j / 128, k = j % 128 / 32, r = j % 32;
      const uchar l = b[64 * h + 32 * (k % 2) + r];
      const int q = (k < 2 ? l & 15 : l >> 4) | ((b[128 + 32 * h + r] >> (2 * k)) & 3) << 4;
      return f16_at(b + 208) * ((global const char*)b)[192 + j / 16] * (q - 32);
    }
    default: {  // T_IQ4_XS: d, scales_h, scales_l[4], qs[128]
      const int s = j / 32;
      return f16_at(b) * (scale_iq4_xs(b, s) - 32) * kIq4nl[nibble(b + 8 + 16 * s, j % 32)];
    }
  }
}

// ---- 32 elements in registers ----------------------------------------------

inline float16 low_nibbles(uchar16 q) { return convert_float16(q & (uchar16)15); }
inline float16 high_nibbles(uchar16 q) { return convert_float16(q >> (uchar16)4); }
// Bits 0-15 of `mask`, one per lane, as 0.0 or 1.0.
inline float16 bits16(uint mask) {
  const uint16 lane = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return convert_float16(((uint16)(mask) >> lane) & (uint16)1);
}
inline uint u32_at(qptr p) { return (uint)p[0] | (uint)p[1] << 8 | (uint)p[2] << 16 | (uint)p[3] << 24; }
// table[low nibble] and table[high nibble] of 16 bytes.
inline void lookup_nibbles(constant float* table, qptr qs, float16* lo, float16* hi) {
  float l[16], h[16];
  for (int i = 0; i < 16; ++i) {
    l[i] = table[qs[i] & 15];
    h[i] = table[qs[i] >> 4];
  }
  *lo = vload16(0, l);
  *hi = vload16(0, h);
}

// 32-element blocks: chunk c is block c.
inline void dq_q8_0(qptr row, long c, float16* lo, float16* hi) {
  qptr b = row + c * Q8_0_BYTES;
  const float d = f16_at(b);
  *lo = d * convert_float16(vload16(0, (global const char*)(b + 2)));
  *hi = d * convert_float16(vload16(1, (global const char*)(b + 2)));
}

inline void dq_q4_0(qptr row, long c, float16* lo, float16* hi) {
  qptr b = row + c * Q4_0_BYTES;
  const float d = f16_at(b);
  const uchar16 q = vload16(0, b + 2);
  *lo = d * (low_nibbles(q) - 8.0f);
  *hi = d * (high_nibbles(q) - 8.0f);
}

inline void dq_q4_1(qptr row, long c, float16* lo, float16* hi) {
  qptr b = row + c * Q4_1_BYTES;
  const float d = f16_at(b), m = f16_at(b + 2);
  const uchar16 q = vload16(0, b + 4);
  *lo = d * low_nibbles(q) + m;
  *hi = d * high_nibbles(q) + m;
}

inline void dq_q5_0(qptr row, long c, float16* lo, float16* hi) {
  qptr b = row + c * Q5_0_BYTES;
  const float d = f16_at(b);
  const uint h = u32_at(b + 2);
  const uchar16 q = vload16(0, b + 6);
  *lo = d * (low_nibbles(q) + 16.0f * bits16(h) - 16.0f);
  *hi = d * (high_nibbles(q) + 16.0f * bits16(h >> 16) - 16.0f);
}

inline void dq_q5_1(qptr row, long c, float16* lo, float16* hi) {
  qptr b = row + c * Q5_1_BYTES;
  const float d = f16_at(b), m = f16_at(b + 2);
  const uint h = u32_at(b + 4);
  const uchar16 q = vload16(0, b + 8);
  *lo = d * (low_nibbles(q) + 16.0f * bits16(h)) + m;
  *hi = d * (high_nibbles(q) + 16.0f * bits16(h >> 16)) + m;
}

inline void dq_iq4_nl(qptr row, long c, float16* lo, float16* hi) {
  qptr b = row + c * IQ4_NL_BYTES;
  lookup_nibbles(kIq4nl, b + 2, lo, hi);
  const float d = f16_at(b);
  *lo *= d;
  *hi *= d;
}

inline void dq_mxfp4(qptr row, long c, float16* lo, float16* hi) {
  qptr b = row + c * MXFP4_BYTES;
  lookup_nibbles(kMxfp4, b + 1, lo, hi);
  const float d = mxfp4_scale(b[0]);
  *lo *= d;
  *hi *= d;
}

// 256-element super-blocks: chunk c is 32-element part s = c % 8 of block c / 8.
#define SUPER_BLOCK(T) \
  qptr b = row + (c / 8) * T##_BYTES; \
  const int s = (int)(c % 8)

inline void dq_q2_k(qptr row, long c, float16* lo, float16* hi) {  // scales[16], qs[64], d, dmin
  SUPER_BLOCK(Q2_K);
  const uchar shift = (uchar)(2 * (s % 4));
  qptr qs = b + 16 + 32 * (s / 4);
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  const int sl = b[2 * s], sh = b[2 * s + 1];  // sub-blocks of 16: scale | min << 4
  *lo = d * (sl & 15) * convert_float16((vload16(0, qs) >> shift) & (uchar16)3) - dmin * (sl >> 4);
  *hi = d * (sh & 15) * convert_float16((vload16(1, qs) >> shift) & (uchar16)3) - dmin * (sh >> 4);
}

inline void dq_q3_k(qptr row, long c, float16* lo, float16* hi) {  // hmask[32], qs[64], scales[12], d
  SUPER_BLOCK(Q3_K);
  const uchar shift = (uchar)(2 * (s % 4)), hbit = (uchar)(4 * (s / 4) + s % 4);
  qptr qs = b + 32 + 32 * (s / 4);
  const float d = f16_at(b + 108);
  const float16 ql = convert_float16((vload16(0, qs) >> shift) & (uchar16)3);
  const float16 qh = convert_float16((vload16(1, qs) >> shift) & (uchar16)3);
  const float16 hl = convert_float16((vload16(0, b) >> hbit) & (uchar16)1);
  const float16 hh = convert_float16((vload16(1, b) >> hbit) & (uchar16)1);
  *lo = d * (scale_q3(b + 96, 2 * s) - 32) * (ql + 4.0f * hl - 4.0f);
  *hi = d * (scale_q3(b + 96, 2 * s + 1) - 32) * (qh + 4.0f * hh - 4.0f);
}

// Q4_K and Q5_K (qh: the 5th bits, or null).
inline void dq_q45_k(qptr b, int s, qptr qh, qptr qs, float16* lo, float16* hi) {
  const uchar shift = (uchar)(4 * (s % 2));
  qs += 32 * (s / 2);
  const int2 sm = scale_min6(b + 4, s);
  const float d = f16_at(b) * sm.x, m = f16_at(b + 2) * sm.y;
  float16 ql = convert_float16((vload16(0, qs) >> shift) & (uchar16)15);
  float16 qhi = convert_float16((vload16(1, qs) >> shift) & (uchar16)15);
  if (qh) {
    ql += 16.0f * convert_float16((vload16(0, qh) >> (uchar16)s) & (uchar16)1);
    qhi += 16.0f * convert_float16((vload16(1, qh) >> (uchar16)s) & (uchar16)1);
  }
  *lo = d * ql - m;
  *hi = d * qhi - m;
}

inline void dq_q4_k(qptr row, long c, float16* lo, float16* hi) {  // d, dmin, scales[12], qs[128]
  SUPER_BLOCK(Q4_K);
  dq_q45_k(b, s, 0, b + 16, lo, hi);
}

inline void dq_q5_k(qptr row, long c, float16* lo, float16* hi) {  // d, dmin, scales[12], qh[32], qs[128]
  SUPER_BLOCK(Q5_K);
  dq_q45_k(b, s, b + 16, b + 48, lo, hi);
}

inline void dq_q6_k(qptr row, long c, float16* lo, float16* hi) {  // ql[128], qh[64], scales[16], d
  SUPER_BLOCK(Q6_K);
  const int h = s / 4, k = s % 4;
  qptr ql = b + 64 * h + 32 * (k % 2);
  qptr qh = b + 128 + 32 * h;
  const uchar lshift = (uchar)(k < 2 ? 0 : 4), hshift = (uchar)(2 * k);
  const float16 l0 = convert_float16((vload16(0, ql) >> lshift) & (uchar16)15);
  const float16 l1 = convert_float16((vload16(1, ql) >> lshift) & (uchar16)15);
  const float16 h0 = convert_float16((vload16(0, qh) >> hshift) & (uchar16)3);
  const float16 h1 = convert_float16((vload16(1, qh) >> hshift) & (uchar16)3);
  global const char* scales = (global const char*)(b + 192);
  const float d = f16_at(b + 208);
  *lo = d * scales[2 * s] * (l0 + 16.0f * h0 - 32.0f);
  *hi = d * scales[2 * s + 1] * (l1 + 16.0f * h1 - 32.0f);
}

inline void dq_iq4_xs(qptr row, long c, float16* lo, float16* hi) {  // d, scales_h, scales_l[4], qs[128]
  SUPER_BLOCK(IQ4_XS);
  lookup_nibbles(kIq4nl, b + 8 + 16 * s, lo, hi);
  const float d = f16_at(b) * (scale_iq4_xs(b, s) - 32);
  *lo *= d;
  *hi *= d;
}

// ---- quantization --------------------------------------------------------------

// The element of largest magnitude, with its sign.
inline float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (fabs(x[j]) > amax) {
      amax = fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Quantizes 32 floats into one block of q8_0, q4_0, q4_1, q5_0 or q5_1,
// with the same arithmetic as the CPU's from_float (no fused multiply-add).
inline void quantize_block(const float* x, global char* blk, int type) {
#pragma OPENCL FP_CONTRACT OFF
  global uchar* ub = (global uchar*)blk;
  if (type == T_Q8_0) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = fmax(amax, fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (global half*)blk);
    for (int j = 0; j < 32; ++j) blk[2 + j] = (char)(int)round(x[j] * id);
    return;
  }
  // The others: q = min(qmax, (int)((x - min) * id + bias)), as 4 or 5 bits.
  float d, lo = 0.0f, bias;
  int qmax;
  if (type == T_Q4_0 || type == T_Q5_0) {  // the element of largest magnitude maps to -8 / -16
    const float half_range = type == T_Q4_0 ? 8.0f : 16.0f;
    d = signed_absmax(x) / -half_range;
    bias = half_range + 0.5f;
    qmax = type == T_Q4_0 ? 15 : 31;
  } else {  // T_Q4_1, T_Q5_1: from the minimum to the maximum
    float max = x[0];
    lo = x[0];
    for (int j = 1; j < 32; ++j) {
      lo = fmin(lo, x[j]);
      max = fmax(max, x[j]);
    }
    qmax = type == T_Q4_1 ? 15 : 31;
    d = (max - lo) / (float)qmax;
    bias = 0.5f;
  }
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = min(qmax, (int)((x[j] - lo) * id + bias));
  vstore_half_rte(d, 0, (global half*)blk);
  int at = 2;  // after d: m (q4_1, q5_1), qh (q5_0, q5_1), then the nibbles
  if (type == T_Q4_1 || type == T_Q5_1) {
    vstore_half_rte(lo, 1, (global half*)blk);
    at = 4;
  }
  if (type == T_Q5_0 || type == T_Q5_1) {
    uint h = 0;
    for (int j = 0; j < 32; ++j) h |= (uint)((q[j] >> 4) & 1) << j;
    for (int k = 0; k < 4; ++k) ub[at + k] = (uchar)(h >> (8 * k));
    at += 4;
  }
  for (int j = 0; j < 16; ++j) ub[at + j] = (uchar)((q[j] & 15) | (q[j + 16] & 15) << 4);
}
