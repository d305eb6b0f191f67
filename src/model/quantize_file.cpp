// quantize_file: a GGUF model converted tensor by tensor as
// plan_quantization says, rows split across threads, written atomically.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/quantize.h"

namespace loom {
namespace {

// Keys of one shard of a split model; the output is one file.
constexpr std::string_view kSplitKeys[] = {"split.no", "split.count", "split.tensors.count"};

bool is_float_type(uint32_t id) {
  return id == static_cast<uint32_t>(DType::F32) || id == static_cast<uint32_t>(DType::F16) ||
         id == static_cast<uint32_t>(DType::BF16);
}

// Converts `rows` rows of `ncols` elements from `from` to `to`, rows split
// into contiguous ranges across `threads` threads.
void convert_rows(const uint8_t* src, DType from, uint8_t* dst, DType to, int64_t ncols, int64_t rows, int threads) {
  const size_t src_row = row_size(from, ncols), dst_row = row_size(to, ncols);
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<float> buf(from == DType::F32 ? 0 : ncols);
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* in = src + r * src_row;
      const float* x = reinterpret_cast<const float*>(in);
      if (from != DType::F32) {
        traits(from).to_float(in, buf.data(), ncols);
        x = buf.data();
      }
      traits(to).from_float(x, dst + r * dst_row, ncols);
    }
  };
  const int n = static_cast<int>(std::clamp<int64_t>(threads, 1, rows));
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work, rows * i / n, rows * (i + 1) / n);
  work(0, rows / n);
  for (auto& t : pool) t.join();
}

}  // namespace

void quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& options) {
  const auto in = gguf::File::open(in_path);
  if (in->get_uint_or("split.count").value_or(1) > 1)
    fail("{} is one shard of a split model ({} shards); merge it first", in_path, in->get_uint("split.count"));
  const std::vector<TensorQuantPlan> plan = plan_quantization(*in, options);

  gguf::Writer out;
  for (const auto& kv : in->metadata())
    if (std::find(std::begin(kSplitKeys), std::end(kSplitKeys), kv.key) == std::end(kSplitKeys))
      out.set(kv.key, kv.value);
  out.set("general.quantization_version", gguf::Value::u32(2));
  out.set("general.file_type", gguf::Value::u32(static_cast<uint32_t>(options.file_type)));

  const gguf::File& file = *in;
  std::string writing;  // the tensor being written, for errors
  size_t writing_size = 0;
  for (const auto& p : plan) {
    const gguf::TensorInfo& t = *file.find_tensor(p.name);
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (p.from != p.to && !is_float_type(p.from)) {
      const auto* from = gguf::type_info(p.from);
      fail("{}: tensor '{}' is {}; requantizing it to {} is not supported (quantize from an f32, f16 or bf16 file)",
           in_path, p.name, from ? from->name : "an unknown type", type_name(static_cast<DType>(p.to)));
    }
    out.add_tensor(p.name, p.to, ne, [&, p](uint8_t* dst, size_t size) {
      writing = p.name;
      writing_size = size;
      const uint8_t* src = file.data(t);
      std::vector<uint8_t> read;
      if (!src) {
        read.resize(t.size);
        file.read_tensor(t, read.data(), 0, t.size);
        src = read.data();
      }
      if (p.from == p.to) {
        std::memcpy(dst, src, size);
        return;
      }
      const int64_t rows = static_cast<int64_t>(t.ne[1] * t.ne[2] * t.ne[3]);
      convert_rows(src, static_cast<DType>(p.from), dst, static_cast<DType>(p.to), t.ne[0], rows, options.threads);
    });
  }
  if (options.progress)
    out.set_progress([&](size_t done, size_t total) { options.progress(done, total, plan[done - 1].name); });
  try {
    out.write(out_path);
  } catch (const Error& e) {
    if (writing.empty()) throw;
    fail("{} (at tensor '{}', {} bytes; no output file was left)", e.what(), writing, writing_size);
  }
}

}  // namespace loom
