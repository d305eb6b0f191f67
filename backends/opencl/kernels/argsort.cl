// argsort: each work-item (i0, row) finds the rank of element i0 in its row
// and writes its index there: O(ne0^2) work per row, meant for short rows
// (router logits of a few hundred experts). The order is a stable sort with
// NaNs last, as on the CPU.
inline bool argsort_before(float xj, long j, float xi, long i, int descending) {
  const bool nj = isnan(xj), ni = isnan(xi);
  if (nj || ni) return nj && ni ? j < i : ni;
  if (xj == xi) return j < i;
  return descending ? xj > xi : xj < xi;
}

kernel void k_argsort(TENSOR(a), TENSOR(d), int descending) {
  const long i = get_global_id(0), r = get_global_id(1);
  if (i >= a_ne.x) return;
  const long i1 = r % a_ne.y, i2 = r / a_ne.y % a_ne.z, i3 = r / (a_ne.y * a_ne.z);
  global const char* row = ROW(a, i1, i2, i3);
  const float xi = *(global const float*)(row + i * a_nb.x);
  long rank = 0;
  for (long j = 0; j < a_ne.x; ++j)
    if (argsort_before(*(global const float*)(row + j * a_nb.x), j, xi, i, descending)) ++rank;
  *(global int*)ELEM(d, rank, i1, i2, i3) = (int)i;
}
