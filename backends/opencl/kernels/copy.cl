// Data movement: get_rows, set_rows, cpy/cont with type conversion.
// Row indices outside the target are skipped and reported (report_error).

// Launched over (a.ne0, idx.ne0, idx.ne1 * idx.ne2); the result is F32.
kernel void k_get_rows(TENSOR(a), int a_type, TENSOR(idx), TENSOR(d), global int* err, int label) {
  const long i0 = get_global_id(0), i10 = get_global_id(1), z = get_global_id(2);
  if (i0 >= d_ne.x) return;
  const long i11 = z % idx_ne.y, i12 = z / idx_ne.y;
  const int row = *(global const int*)(idx_p + idx_off + i10 * idx_nb.x + i11 * idx_nb.y + i12 * idx_nb.z);
  if (row < 0 || row >= a_ne.y) {
    report_error(err, label, row);
    return;
  }
  const float v = load_elem(ROW(a, row, i11, i12), a_type, i0, a_nb.x);
  *(global float*)ELEM(d, i0, i10, i11, i12) = v;
}

// Plain destination types. Launched over (s.ne0, s.ne1, s.ne2 * s.ne3).
kernel void k_set_rows(TENSOR(s), TENSOR(idx), TENSOR(d), int d_type, global int* err, int label) {
  const long i0 = get_global_id(0), i1 = get_global_id(1), z = get_global_id(2);
  if (i0 >= s_ne.x) return;
  const long i2 = z % s_ne.z, i3 = z / s_ne.z;
  const int row = *(global const int*)(idx_p + idx_off + i1 * idx_nb.x + i2 * idx_nb.y + i3 * idx_nb.z);
  if (row < 0 || row >= d_ne.y) {
    report_error(err, label, row);
    return;
  }
  const float v = *(global const float*)ELEM(s, i0, i1, i2, i3);
  store_elem(ELEM(d, i0, row, i2, i3), d_type, v);
}

// Quantized destination (a type quantize_block writes: 32-element blocks):
// one work-item per block, launched over (s.ne0 / 32, s.ne1, s.ne2 * s.ne3).
kernel void k_set_rows_q(TENSOR(s), TENSOR(idx), TENSOR(d), int d_type, global int* err, int label) {
  const long ib = get_global_id(0), i1 = get_global_id(1), z = get_global_id(2);
  if (ib >= s_ne.x / 32) return;
  const long i2 = z % s_ne.z, i3 = z / s_ne.z;
  const int row = *(global const int*)(idx_p + idx_off + i1 * idx_nb.x + i2 * idx_nb.y + i3 * idx_nb.z);
  if (row < 0 || row >= d_ne.y) {
    report_error(err, label, row);
    return;
  }
  float x[32];
  global const char* in = ROW(s, i1, i2, i3);
  for (int j = 0; j < 32; ++j) x[j] = *(global const float*)(in + (ib * 32 + j) * s_nb.x);
  quantize_block(x, ROW(d, row, i2, i3) + ib * d_nb.x, d_type);
}

// cpy/cont into a plain type. Launched over d's (ne0, ne1, ne2 * ne3); the
// source element is the one with the same index in logical (row-major) order.
kernel void k_cpy(TENSOR(s), int s_type, TENSOR(d), int d_type) {
  const long i0 = get_global_id(0), i1 = get_global_id(1), z = get_global_id(2);
  if (i0 >= d_ne.x) return;
  const long i2 = z % d_ne.z, i3 = z / d_ne.z;
  long4 j = (long4)(i0, i1, i2, i3);
  if (any(s_ne != d_ne)) {
    long k = i0 + d_ne.x * (i1 + d_ne.y * (i2 + d_ne.z * i3));
    j.x = k % s_ne.x;
    k /= s_ne.x;
    j.y = k % s_ne.y;
    k /= s_ne.y;
    j.z = k % s_ne.z;
    j.w = k / s_ne.z;
  }
  global char* out = ELEM(d, i0, i1, i2, i3);
  if (s_type == d_type) {  // raw bytes: exact for every plain type
    global const char* in = ELEM(s, j.x, j.y, j.z, j.w);
    if (type_bytes(d_type) == 4) *(global int*)out = *(global const int*)in;
    else *(global short*)out = *(global const short*)in;
    return;
  }
  const float v = load_elem(ROW(s, j.y, j.z, j.w), s_type, j.x, s_nb.x);
  store_elem(out, d_type, v);
}

// cpy/cont into a quantized type (rows have the same length): one work-item
// per destination block, launched over (d.ne0 / block elements, d.ne1,
// d.ne2 * d.ne3). Blocks of the same type are copied byte for byte; other
// sources are quantized (32-element blocks, see quantize_block).
kernel void k_cpy_q(TENSOR(s), int s_type, TENSOR(d), int d_type) {
  const long ib = get_global_id(0), i1 = get_global_id(1), z = get_global_id(2);
  if (ib >= d_ne.x / block_elems(d_type)) return;
  const long i2 = z % d_ne.z, i3 = z / d_ne.z;
  long r = i1 + d_ne.y * (i2 + d_ne.z * i3);  // the same row of the source
  const long j1 = r % s_ne.y, j2 = r / s_ne.y % s_ne.z, j3 = r / (s_ne.y * s_ne.z);
  global const char* in = ROW(s, j1, j2, j3);
  global char* out = ROW(d, i1, i2, i3) + ib * d_nb.x;
  if (s_type == d_type) {
    const int n = block_bytes(d_type);
    global const char* blk = in + ib * s_nb.x;
    for (int k = 0; k < n; ++k) out[k] = blk[k];
    return;
  }
  float x[32];
  for (int k = 0; k < 32; ++k) x[k] = load_elem(in, s_type, ib * 32 + k, s_nb.x);
  quantize_block(x, out, d_type);
}
