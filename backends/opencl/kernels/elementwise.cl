// Element-wise kernels. Launched over (ne0, ne1, ne2 * ne3) of the result;
// every operand is addressed through its strides, b broadcasts by modulo.
// `op` is the loom::Op id (OP_*).
kernel void k_binary(TENSOR(a), TENSOR(b), TENSOR(d), int op) {
  const long i0 = get_global_id(0), i1 = get_global_id(1), z = get_global_id(2);
  if (i0 >= d_ne.x) return;
  const long i2 = z % d_ne.z, i3 = z / d_ne.z;
  const float x = *(global const float*)ELEM(a, i0, i1, i2, i3);
  const float y = *(global const float*)ELEM(b, i0 % b_ne.x, i1 % b_ne.y, i2 % b_ne.z, i3 % b_ne.w);
  float r;
  if (op == OP_ADD) r = x + y;
  else if (op == OP_SUB) r = x - y;
  else if (op == OP_MUL) r = x * y;
  else r = x / y;
  *(global float*)ELEM(d, i0, i1, i2, i3) = r;
}

kernel void k_unary(TENSOR(a), TENSOR(d), int op, float p0, float p1) {
  const long i0 = get_global_id(0), i1 = get_global_id(1), z = get_global_id(2);
  if (i0 >= d_ne.x) return;
  const long i2 = z % d_ne.z, i3 = z / d_ne.z;
  const float x = *(global const float*)ELEM(a, i0, i1, i2, i3);
  float r;
  if (op == OP_SCALE) {
    r = x * p0 + p1;
  } else if (op == OP_SQR) {
    r = x * x;
  } else if (op == OP_SQRT) {
    r = sqrt(x);
  } else if (op == OP_SILU) {
    r = x / (1.0f + exp(-x));
  } else if (op == OP_GELU) {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    r = 0.5f * x * (1.0f + tanh(k * x * (1.0f + 0.044715f * x * x)));
  } else if (op == OP_TANH) {
    r = tanh(x);
  } else if (op == OP_SIGMOID) {
    r = 1.0f / (1.0f + exp(-x));
  } else if (op == OP_CLAMP) {
    r = fmin(fmax(x, p0), p1);
  } else {
    r = x > 0.0f ? x : 0.0f;
  }
  *(global float*)ELEM(d, i0, i1, i2, i3) = r;
}

// a and b joined along `dim`; elements are copied as raw bytes.
kernel void k_concat(TENSOR(a), TENSOR(b), TENSOR(d), int dim, int el) {
  const long i0 = get_global_id(0), i1 = get_global_id(1), z = get_global_id(2);
  if (i0 >= d_ne.x) return;
  long4 i = (long4)(i0, i1, z % d_ne.z, z / d_ne.z);
  global char* out = ELEM(d, i.x, i.y, i.z, i.w);
  const long ad = dim == 0 ? a_ne.x : dim == 1 ? a_ne.y : dim == 2 ? a_ne.z : a_ne.w;
  const long id = dim == 0 ? i.x : dim == 1 ? i.y : dim == 2 ? i.z : i.w;
  global const char* in;
  if (id < ad) {
    in = ELEM(a, i.x, i.y, i.z, i.w);
  } else {
    if (dim == 0) i.x -= ad;
    else if (dim == 1) i.y -= ad;
    else if (dim == 2) i.z -= ad;
    else i.w -= ad;
    in = ELEM(b, i.x, i.y, i.z, i.w);
  }
  if (el == 4) *(global int*)out = *(global const int*)in;
  else *(global short*)out = *(global const short*)in;
}
