// CPU_Repack: a buffer type for Q4_0 / Q8_0 / Q4_K / Q6_K weights that mul_mat
// reads as src0. Writing a weight here interleaves each group of 16 rows
// block by block, so one 64-byte load holds 4 bytes of every row: the
// AVX-512 mat-vec multiplies 16 rows per vpdpbusd without shuffles, the AVX2
// one 8 rows per maddubs (each 32-byte half). Each field of the plain block
// becomes an array over the 16 rows. One group and block of Q4_0 / Q8_0
// (16 rows x 32 elements):
//   uint16 d[16]                the 16 rows' fp16 scales
//   uint8  v[n][16][4]          v[t][r] = row r's quant bytes 4t..4t+3
//                               (n = 4 for Q4_0, 8 for Q8_0)
// and of Q4_K (16 rows x 256 elements):
//   uint16 d[16], dmin[16]
//   uint8  sc[12][16]           sc[j][r] = row r's scales byte j
//   uint8  v[32][16][4]         v[t][r] = row r's qs bytes 4t..4t+3
// and of Q6_K (16 rows x 256 elements, q6_k_interleaved.h):
//   uint8  ql[32][16][4], qh[16][16][4]   row r's ql / qh bytes 4t..4t+3
//   int8   sc[16][16]; uint16 d[16]
// It is a byte permutation of the plain rows with the same size, so reads
// (get_tensor) give back the plain bytes and a memset is a memset. Tensors
// that do not fit (other types, rows not a multiple of 16, views) are stored
// as they are.
#pragma once

#include <cstdint>

#include "loom/backend.h"

namespace loom::cpu {

inline constexpr int64_t kRepackRows = 16;

// Whether a tensor of this type and shape is interleaved when stored in CPU_Repack.
bool repackable(const Tensor& t);
// Whether t lies interleaved in a CPU_Repack buffer.
bool is_repacked(const Tensor& t);

// Bytes of one group and block: 16 plain blocks' worth.
size_t repack_block_bytes(DType type);
// Interleaves 16 plain rows (row_bytes apart) of nb blocks into `out`.
void repack_group(DType type, const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out);
// Plain row `lane` (0..15) of an interleaved group of nb blocks.
void unpack_row(DType type, const uint8_t* group, int64_t nb, int lane, uint8_t* row);

class RepackBuffer final : public Buffer {
 public:
  RepackBuffer(BufferType& type, void* data, size_t size);
  ~RepackBuffer() override;

  void* base() override { return data_; }
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override;
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override;
  void clear(uint8_t value) override;

 private:
  void* data_;
};

class RepackBufferType final : public BufferType {
 public:
  explicit RepackBufferType(Device* device) : device_(device) {}
  std::string_view name() const override { return "CPU_Repack"; }
  size_t alignment() const override { return 64; }
  // Not plain host memory: only the CPU's mul_mat reads it in place.
  bool is_host() const override { return false; }
  Device* device() const override { return device_; }
  // A mul_mat whose src0 (a weight) would be interleaved here and that the
  // CPU runs faster so: the level mul_mat uses (mul_mat_isa(): AVX2 or
  // AVX-512, not scalar) has a gemm16 kernel for the type.
  bool supports_op(const Tensor& node) const override;

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override;

 private:
  Device* device_;
};

}  // namespace loom::cpu
