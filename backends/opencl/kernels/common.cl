// Shared by every kernel. A tensor argument is four kernel arguments: the
// buffer, the byte offset of the tensor in it, the element counts ne and the
// byte strides nb (as in loom::Tensor). Type ids (T_F32, T_Q4_0, ...) and op
// ids (OP_ADD, OP_SCALE, ...) are not written here: the host defines them from
// loom::DType and loom::Op when it builds the program (kernel_defines() in
// opencl_ops.cpp), so they always match.
#define QK 32  // elements per Q8_0 / Q4_0 block
#define Q8_0_BYTES 34
#define Q4_0_BYTES 18

#define TENSOR(n) global char *n##_p, ulong n##_off, long4 n##_ne, ulong4 n##_nb
#define ROW(n, i1, i2, i3) (n##_p + n##_off + (i1) * n##_nb.y + (i2) * n##_nb.z + (i3) * n##_nb.w)
#define ELEM(n, i0, i1, i2, i3) (ROW(n, i1, i2, i3) + (i0) * n##_nb.x)

// Records the first bad value seen by any kernel (err[0] flag, err[1] which
// node, err[2] the value); the host reports it after the graph ends.
inline void report_error(global int* err, int label, int value) {
  if (atomic_cmpxchg(err, 0, 1) == 0) {
    err[1] = label;
    err[2] = value;
  }
}

inline float load_bf16(global const char* p) { return as_float(((uint)*(global const ushort*)p) << 16); }

// Round to nearest even, NaN stays NaN (as loom::fp32_to_bf16).
inline void store_bf16(global char* p, float v) {
  uint x = as_uint(v);
  ushort h;
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    h = (ushort)((x >> 16) | 0x40u);
  } else {
    x += 0x7fffu + ((x >> 16) & 1u);
    h = (ushort)(x >> 16);
  }
  *(global ushort*)p = h;
}

// Element i0 of the row at `row`; nb0 is the stride between elements (plain
// types) or between blocks (quantized types).
inline float load_elem(global const char* row, int type, long i0, ulong nb0) {
  if (type == T_F32) return *(global const float*)(row + i0 * nb0);
  if (type == T_F16) return vload_half(0, (global const half*)(row + i0 * nb0));
  if (type == T_BF16) return load_bf16(row + i0 * nb0);
  if (type == T_I32) return (float)*(global const int*)(row + i0 * nb0);
  global const uchar* b = (global const uchar*)(row + (i0 / QK) * nb0);
  const float d = vload_half(0, (global const half*)b);
  const int j = (int)(i0 % QK);
  if (type == T_Q8_0) return (float)((global const char*)b)[2 + j] * d;
  const int q = j < QK / 2 ? (b[2 + j] & 15) : (b[2 + j - QK / 2] >> 4);  // T_Q4_0
  return (float)(q - 8) * d;
}

// Stores into a plain (not quantized, not I32) element.
inline void store_elem(global char* p, int type, float v) {
  if (type == T_F32) {
    *(global float*)p = v;
  } else if (type == T_F16) {
    vstore_half_rte(v, 0, (global half*)p);
  } else {
    store_bf16(p, v);
  }
}

inline int type_bytes(int type) { return type == T_F16 || type == T_BF16 ? 2 : 4; }

// Quantizes 32 floats into one block, exactly as the CPU's from_float.
inline void quantize_block(const float* x, global char* blk, int type) {
  if (type == T_Q8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j) amax = fmax(amax, fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (global half*)blk);
    for (int j = 0; j < QK; ++j) blk[2 + j] = (char)(int)round(x[j] * id);
  } else {  // T_Q4_0: the element of largest magnitude maps to -8
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; ++j) {
      if (fabs(x[j]) > amax) {
        amax = fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (global half*)blk);
    global uchar* qs = (global uchar*)(blk + 2);
    for (int j = 0; j < QK / 2; ++j) {
      const int q0 = min(15, (int)(x[j] * id + 8.5f));
      const int q1 = min(15, (int)(x[j + QK / 2] * id + 8.5f));
      qs[j] = (uchar)(q0 | (q1 << 4));
    }
  }
}

inline float hsum16(float16 v) {
  const float8 a = v.lo + v.hi;
  const float4 b = a.lo + a.hi;
  const float2 c = b.lo + b.hi;
  return c.x + c.y;
}
