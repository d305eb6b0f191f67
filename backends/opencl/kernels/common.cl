// Shared by every kernel. A tensor argument is four kernel arguments: the
// buffer, the byte offset of the tensor in it, the element counts ne and the
// byte strides nb (as in loom::Tensor). Type ids (T_F32, T_Q4_0, ...) and op
// ids (OP_ADD, OP_SCALE, ...) are not written here: the host defines them from
// loom::DType and loom::Op when it builds the program (kernel_defines() in
// opencl_ops.cpp), so they always match. The quantized block formats are in
// quants.cl, which comes first.

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
  const int n = block_elems(type);
  return dequantize_elem(type, (qptr)(row + (i0 / n) * nb0), (int)(i0 % n));
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

inline float hsum16(float16 v) {
  const float8 a = v.lo + v.hi;
  const float4 b = a.lo + a.hi;
  const float2 c = b.lo + b.hi;
  return c.x + c.y;
}
