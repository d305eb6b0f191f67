#include <gtest/gtest.h>

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/types.h"

namespace loom::gguf {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("loom_gguf_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A hand-built file whose fields a test can corrupt one at a time.
struct RawFile {
  uint32_t magic = 0x46554747, version = 3;
  uint32_t n_dims = 2;
  std::vector<uint64_t> dims = {32, 2};
  uint32_t type = 0;  // f32
  uint64_t offset = 0;
  uint64_t tensor_count = 1;
  bool truncate_data = false;

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> b;
    auto put = [&b](const void* p, size_t n) {
      b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    };
    auto u32 = [&](uint32_t v) { put(&v, 4); };
    auto u64 = [&](uint64_t v) { put(&v, 8); };
    auto str = [&](const std::string& s) {
      u64(s.size());
      put(s.data(), s.size());
    };
    u32(magic);
    u32(version);
    u64(tensor_count);
    u64(1);
    str("general.architecture");
    u32(8);
    str("llama");
    str("w");
    u32(n_dims);
    for (uint64_t d : dims) u64(d);
    u32(type);
    u64(offset);
    while (b.size() % 32) b.push_back(0);
    const size_t data = 32 * 2 * 4;
    b.resize(b.size() + (truncate_data ? data / 2 : data), 0x11);
    return b;
  }
};

std::string open_error(const std::vector<uint8_t>& bytes) {
  const std::string path = temp_path("raw.gguf");
  write_bytes(path, bytes);
  try {
    File::open(path);
  } catch (const Error& e) {
    std::filesystem::remove(path);
    return e.what();
  }
  std::filesystem::remove(path);
  return "";
}

TEST(Gguf, RoundTripsEveryValueTypeAndTensor) {
  Writer w;
  w.set("general.architecture", Value::string("llama"));
  w.set("u8", {ValueType::U8, ValueType::U8, uint64_t{200}});
  w.set("i8", {ValueType::I8, ValueType::U8, int64_t{-100}});
  w.set("u16", {ValueType::U16, ValueType::U8, uint64_t{60000}});
  w.set("i16", {ValueType::I16, ValueType::U8, int64_t{-30000}});
  w.set("u32", Value::u32(4000000000u));
  w.set("i32", Value::i32(-2000000000));
  w.set("u64", Value::u64(1ull << 40));
  w.set("i64", {ValueType::I64, ValueType::U8, int64_t{-(1ll << 40)}});
  w.set("f32", Value::f32(0.5f));
  w.set("f64", {ValueType::F64, ValueType::U8, 0.125});
  w.set("bool", Value::boolean(true));
  w.set("strings", Value::strings({"a", "", "hello"}));
  w.set("floats", Value::f32s({1.0f, -2.0f}));
  w.set("nested", Value::array(ValueType::Array, {Value::i32s({1, 2}), Value::i32s({3})}));
  std::vector<uint8_t> f32_bytes(32 * 3 * 4);
  for (size_t i = 0; i < f32_bytes.size(); ++i) f32_bytes[i] = static_cast<uint8_t>(i);
  w.add_tensor("a", 0, {32, 3}, f32_bytes);
  std::vector<uint8_t> q4(row_size(DType::Q4_0, 64) * 2, 0x5a);
  w.add_tensor("b", static_cast<uint32_t>(DType::Q4_0), {64, 2}, q4);
  const std::string path = temp_path("roundtrip.gguf");
  w.write(path);

  for (bool mmap : {true, false}) {
    auto f = File::open(path, mmap);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->mapped(), mmap);
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_EQ(f->get("u8").as_uint(), 200u);
    EXPECT_EQ(f->get("i8").as_int(), -100);
    EXPECT_EQ(f->get("u16").as_uint(), 60000u);
    EXPECT_EQ(f->get("i16").as_int(), -30000);
    EXPECT_EQ(f->get_uint("u32"), 4000000000u);
    EXPECT_EQ(f->get("i32").as_int(), -2000000000);
    EXPECT_EQ(f->get_uint("u64"), 1ull << 40);
    EXPECT_EQ(f->get("i64").as_int(), -(1ll << 40));
    EXPECT_EQ(f->get_f32("f32"), 0.5f);
    EXPECT_EQ(f->get("f64").as_float(), 0.125);
    EXPECT_TRUE(f->get("bool").as_bool());
    const auto& strings = f->get("strings").as_array();
    ASSERT_EQ(strings.size(), 3u);
    EXPECT_EQ(strings[2].as_string(), "hello");
    EXPECT_EQ(f->get("nested").as_array()[1].as_array()[0].as_int(), 3);
    ASSERT_EQ(f->tensors().size(), 2u);
    const TensorInfo* a = f->find_tensor("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->ne, (std::array<int64_t, 4>{32, 3, 1, 1}));
    EXPECT_EQ(a->size, f32_bytes.size());
    EXPECT_EQ(a->file_offset % f->alignment(), 0u);
    std::vector<uint8_t> back(a->size);
    f->read_tensor(*a, back.data(), 0, back.size());
    EXPECT_EQ(back, f32_bytes);
    const TensorInfo* b = f->find_tensor("b");
    std::vector<uint8_t> qback(b->size);
    f->read_tensor(*b, qback.data(), 0, qback.size());
    EXPECT_EQ(qback, q4);
    EXPECT_THROW(f->read_tensor(*b, qback.data(), 1, qback.size()), Error);
  }
  // Typed lookups name the key.
  auto f = File::open(path);
  try {
    f->get_string("u32");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'u32'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f->get("missing.key"), Error);
  std::filesystem::remove(path);
}

TEST(Gguf, WriterChecksTensorsAndLeavesNoPartialFile) {
  Writer w;
  EXPECT_THROW(w.add_tensor("x", 0, {4}, std::vector<uint8_t>(15)), Error);  // size mismatch
  EXPECT_THROW(w.add_tensor("x", 8, {31}, std::vector<uint8_t>{}), Error);  // partial block
  EXPECT_THROW(w.add_tensor("x", 999, {4}, std::vector<uint8_t>(16)), Error);
  w.set("bad", Value::array(ValueType::U32, {Value::string("not a u32")}));
  const std::string path = temp_path("partial.gguf");
  EXPECT_THROW(w.write(path), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(Writer::temp_path(path)));
}

TEST(Gguf, ValidRawFileOpens) {
  EXPECT_EQ(open_error(RawFile{}.bytes()), "");
}

TEST(Gguf, EveryTruncationIsAnErrorNotACrash) {
  const auto full = RawFile{}.bytes();
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    EXPECT_NE(open_error(cut), "") << "prefix of " << n << " bytes opened";
  }
}

// A file that shrinks while it is in use: refused before its tensors are
// read (mapped or not), and a read of a lost page of the mapping ends the
// process with a message and exit status 1, not SIGBUS.
TEST(Gguf, FileThatShrinksWhileInUseIsAnErrorNotSigbus) {
  // A tensor big enough to span several pages, so that the shrink loses pages.
  Writer w;
  w.add_tensor("w", 0, {8192, 2}, std::vector<uint8_t>(8192 * 2 * 4, 1));
  const std::string path = temp_path("shrinks.gguf");
  w.write(path);
  const uint64_t size = std::filesystem::file_size(path);
  auto mapped = File::open(path, true);
  auto read = File::open(path, false);
  const TensorInfo& t = mapped->tensors().at(0);
  ASSERT_NE(mapped->data(t), nullptr);
  std::filesystem::resize_file(path, 4096);
  try {
    mapped->data(t);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("changed while in use"), std::string::npos) << e.what();
  }
  std::vector<uint8_t> dst(t.size);
  try {
    read->read_tensor(t, dst.data(), 0, t.size);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("changed while in use"), std::string::npos) << e.what();
  }
  const volatile uint8_t* last = mapped->map_base() + size - 1;
  EXPECT_EXIT((void)*last, ::testing::ExitedWithCode(1), "changed while it was mapped");
  std::filesystem::remove(path);
}

// Pages of [offset, offset + size) of a mapped file that are in memory.
size_t resident_pages(const File& f, uint64_t offset, uint64_t size) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset / page * page, end = offset + size;
  std::vector<unsigned char> in((end - begin + page - 1) / page);
  if (mincore(const_cast<uint8_t*>(f.map_base()) + begin, end - begin, in.data()) != 0) {
    ADD_FAILURE() << "mincore: " << std::strerror(errno);
    return 0;
  }
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(Gguf, PopulateReadsTheMappedRangeIntoMemory) {
  Writer w;
  w.add_tensor("w", 0, {16384, 16}, std::vector<uint8_t>(16384 * 16 * 4, 7));  // 1 MiB, 256 pages
  const std::string path = temp_path("populate.gguf");
  w.write(path);
  auto f = File::open(path, true);
  const TensorInfo& t = f->tensors().at(0);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t first = (t.file_offset + page - 1) / page * page, size = t.size / 2 / page * page;
  // Drop the file's pages from the page cache (they are clean once synced).
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (resident_pages(*f, first, size) > size / page / 4) {
    std::filesystem::remove(path);
    GTEST_SKIP() << "this kernel kept the file's pages in the page cache";
  }
  f->populate(first, size);
  EXPECT_EQ(resident_pages(*f, first, size), size / page);
  f.reset();
  std::filesystem::remove(path);
}

TEST(Gguf, CorruptFieldsGiveErrorsNamingTheProblem) {
  auto expect_error = [](RawFile r, const std::string& needle) {
    const std::string msg = open_error(r.bytes());
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg;
  };
  RawFile r;
  r.magic = 0x12345678;
  expect_error(r, "not a GGUF file");
  r = {};
  r.version = 7;
  expect_error(r, "version 7");
  r = {};
  r.offset = 64;  // data extends past the end
  expect_error(r, "'w'");
  r = {};
  r.offset = 3;  // misaligned
  expect_error(r, "alignment");
  r = {};
  r.dims = {32, 1ull << 62};
  expect_error(r, "'w'");
  // Regression (issue 18): (ne0 / block) * type_size wrapped to a 0-byte tensor.
  r = {};
  r.n_dims = 1;
  r.dims = {1ull << 62};
  expect_error(r, "tensor 'w' size overflows");
  expect_error(r, "loom_gguf_test_");  // the file
  r.dims = {1ull << 61};  // 2^63 bytes: no overflow, but past the end
  expect_error(r, "past the end");
  r = {};
  r.dims = {32, 0};
  expect_error(r, "dim 1");
  r = {};
  r.type = 77;
  expect_error(r, "type id 77");
  r = {};
  r.type = 8;  // q8_0 with ne0 = 32 is fine, but the data would be 68 bytes: fits
  EXPECT_EQ(open_error(r.bytes()), "");
  r.dims = {33, 2};
  expect_error(r, "block size");
  r = {};
  r.n_dims = 9;
  expect_error(r, "9 dims");
  r = {};
  r.tensor_count = 1ull << 60;
  expect_error(r, "tensors");
  r = {};
  r.truncate_data = true;
  expect_error(r, "past the end");
}

TEST(Gguf, AbsurdStringLengthIsRejectedBeforeAllocating) {
  auto bytes = RawFile{}.bytes();
  // The first key's length field sits right after the 24-byte header.
  const uint64_t huge = 1ull << 50;
  std::memcpy(bytes.data() + 24, &huge, 8);
  EXPECT_NE(open_error(bytes).find("only"), std::string::npos);
}

// Regression (issue 18): one Value per element made a 64 MiB u8 array cost
// 3.2 GB. The heap the open file keeps must be about the array's size.
TEST(Gguf, ArraysCostAboutTheirSizeOnDisk) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  constexpr uint64_t n = 16u << 20;
  std::vector<uint8_t> b;
  auto put = [&b](const void* p, size_t size) {
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + size);
  };
  const uint32_t header[] = {0x46554747, 3};
  const uint64_t counts[] = {0, 1};  // tensors, metadata
  put(header, sizeof header);
  put(counts, sizeof counts);
  const uint64_t key_len = 3;
  put(&key_len, 8);
  put("big", 3);
  const uint32_t types[] = {9, 0};  // an array of u8
  put(types, sizeof types);
  put(&n, 8);
  b.resize(b.size() + n, 7);
  const std::string path = temp_path("big_array.gguf");
  write_bytes(path, b);
  b = {};
  auto heap = [] {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const size_t before = heap();
  auto f = File::open(path);
  const size_t kept = heap() - before;
  const Array& a = f->get("big").as_array();
  EXPECT_EQ(a.size(), n);
  EXPECT_EQ(a[n - 1].as_uint(), 7u);
  EXPECT_LT(kept, n + n / 2) << "the open file keeps " << kept << " bytes of heap for a " << n << "-byte array";
  f.reset();
  std::filesystem::remove(path);
#else
  GTEST_SKIP() << "needs glibc's mallinfo2";
#endif
}

TEST(Gguf, ArraysRoundTripCompactly) {
  Writer w;
  w.set("u8s", Value::array(ValueType::U8, {Value{ValueType::U8, ValueType::U8, uint64_t{1}},
                                            Value{ValueType::U8, ValueType::U8, uint64_t{255}}}));
  w.set("bools", Value::array(ValueType::Bool, {Value::boolean(true), Value::boolean(false)}));
  w.set("i64s", Value::array(ValueType::I64, {Value{ValueType::I64, ValueType::U8, int64_t{-5}}}));
  w.set("strings", Value::strings({"", "x", "hello"}));
  w.set("empty", Value::array(ValueType::F32, {}));  // fuzz finding: memcpy to a null block (UBSan)
  const std::string path = temp_path("arrays.gguf");
  w.write(path);
  auto f = File::open(path);
  const Array& u8s = f->get("u8s").as_array();
  ASSERT_EQ(u8s.size(), 2u);
  EXPECT_EQ(u8s[1].as_uint(), 255u);
  EXPECT_EQ(u8s[1].type, ValueType::U8);
  EXPECT_FALSE(f->get("bools").as_array()[1].as_bool());
  EXPECT_EQ(f->get("i64s").as_array()[0].as_int(), -5);
  const Array& s = f->get("strings").as_array();
  EXPECT_EQ(s.string_at(0), "");
  EXPECT_EQ(s.string_at(2), "hello");
  EXPECT_EQ(s[1].as_string(), "x");
  EXPECT_THROW(s[3], Error);
  EXPECT_EQ(f->get("strings").to_string(), "[3 x string] [\"\", \"x\", \"hello\"]");
  EXPECT_EQ(f->get("empty").as_array().size(), 0u);
  EXPECT_EQ(File::open(path, false)->get("empty").as_array().size(), 0u);
  std::filesystem::remove(path);
}

TEST(Gguf, MissingFileNamesThePath) {
  try {
    File::open("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace loom::gguf
