// loom::quantize_file: file type metadata, the tensors llama.cpp keeps in
// f32, errors that name the file / tensor / sizes and leave no file behind.
// (Types per tensor and bytes are checked against llama.cpp itself by
// tests/parity/run-quantize-parity.)
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/quantize.h"
#include "model_gen/model_gen.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& tag) {
  return (fs::temp_directory_path() / ("loom_quantize_test_" + std::to_string(::getpid()) + "_" + tag + ".gguf"))
      .string();
}

ModelSpec small_spec() {
  ModelSpec spec;
  spec.n_vocab = 300;
  spec.n_layer = 2;
  return spec;
}

// Runs `f`, expecting a loom::Error whose message contains every part.
template <class F>
void expect_error(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

std::vector<float> floats_of(const gguf::File& f, const std::string& name) {
  const auto& t = *f.find_tensor(name);
  const int64_t n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
  std::vector<float> out(n);
  traits(static_cast<DType>(t.type)).to_float(f.data(t), out.data(), n);
  return out;
}

TEST(QuantizeFile, WritesTheFileTypeAndKeepsNormsInF32) {
  const std::string src = temp_path("src"), out = temp_path("q4km");
  write_random_model(small_spec(), DType::F32, 5, src);
  QuantizeOptions options;
  options.file_type = FileType::Q4_K_M;
  options.threads = 3;
  size_t calls = 0, total = 0;
  options.progress = [&](size_t done, size_t n, std::string_view) {
    ++calls;
    total = n;
    EXPECT_EQ(done, calls);
  };
  quantize_file(src, out, options);
  const auto in = gguf::File::open(src);
  const auto q = gguf::File::open(out);
  EXPECT_EQ(calls, in->tensors().size());
  EXPECT_EQ(total, in->tensors().size());
  EXPECT_EQ(q->get_uint("general.file_type"), 15u);
  EXPECT_EQ(q->get_uint("general.quantization_version"), 2u);
  EXPECT_EQ(q->get_string("tokenizer.ggml.model"), in->get_string("tokenizer.ggml.model"));
  ASSERT_EQ(q->tensors().size(), in->tensors().size());
  for (const auto& t : q->tensors()) {
    if (t.name.ends_with("_norm.weight")) {
      EXPECT_EQ(t.type, static_cast<uint32_t>(DType::F32)) << t.name;
    }
  }
  EXPECT_EQ(q->find_tensor("output.weight")->type, static_cast<uint32_t>(DType::Q6_K));
  EXPECT_EQ(q->find_tensor("blk.0.attn_q.weight")->type, static_cast<uint32_t>(DType::Q4_K));
  // ffn_down rows of 704 are not whole 256-blocks: a 32-element type instead.
  EXPECT_EQ(traits(static_cast<DType>(q->find_tensor("blk.0.ffn_down.weight")->type)).block_size, 32);
  // The quantized weights are the source's, within Q4_K's error.
  const auto a = floats_of(*in, "blk.1.attn_q.weight"), b = floats_of(*q, "blk.1.attn_q.weight");
  double err = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * (a[i] - b[i]);
    norm += a[i] * a[i];
  }
  EXPECT_LT(std::sqrt(err / norm), 0.12);
  fs::remove(src);
  fs::remove(out);
}

TEST(QuantizeFile, BadInputNamesTheFileAndLeavesNoOutput) {
  const std::string src = temp_path("not_gguf"), out = temp_path("bad_out");
  std::ofstream(src) << "not a gguf file";
  QuantizeOptions options;
  expect_error([&] { quantize_file(src, out, options); }, {src});
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(gguf::Writer::temp_path(out)));
  fs::remove(src);
}

TEST(QuantizeFile, ImpossibleShapeNamesTensorAndSizes) {
  const std::string src = temp_path("shape_src"), out = temp_path("shape_out");
  ModelSpec spec = small_spec();
  spec.n_embd = 96;  // rows of 96: no whole 256-element blocks
  spec.n_head = 3;
  spec.n_head_kv = 1;
  write_random_model(spec, DType::F32, 5, src);
  QuantizeOptions options;
  options.file_type = FileType::Q8_0;
  options.token_embedding_type = DType::Q4_K;
  expect_error([&] { quantize_file(src, out, options); }, {"token_embd.weight", "96", "256", "q4_K"});
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(gguf::Writer::temp_path(out)));
  fs::remove(src);
}

TEST(QuantizeFile, WriteErrorNamesTensorAndLeavesNoOutput) {
  const std::string src = temp_path("full_src"), out = temp_path("full_out");
  write_random_model(small_spec(), DType::F32, 5, src);
  QuantizeOptions options;
  options.file_type = FileType::Q8_0;
  // Files may not grow past 64 KiB (as a full disk): writes fail with EFBIG.
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 << 10;
  setrlimit(RLIMIT_FSIZE, &small);
  std::string message;
  try {
    quantize_file(src, out, options);
  } catch (const Error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find(out), std::string::npos) << message;
  EXPECT_NE(message.find("at tensor '"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(gguf::Writer::temp_path(out)));
  fs::remove(src);
}

TEST(QuantizeFile, RefusesRequantizing) {
  const std::string src = temp_path("q4_0_src"), out = temp_path("requant_out");
  write_random_model(small_spec(), DType::Q4_0, 5, src);
  QuantizeOptions options;
  options.file_type = FileType::Q8_0;
  expect_error([&] { quantize_file(src, out, options); }, {src, "q4_0", "requantizing"});
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(gguf::Writer::temp_path(out)));
  fs::remove(src);
}

TEST(QuantizeFileTypes, NamesAsLlamaCppSpellsThem) {
  EXPECT_EQ(file_type_from_name("q4_k_m"), FileType::Q4_K_M);
  EXPECT_EQ(file_type_from_name("IQ4_XS"), FileType::IQ4_XS);
  EXPECT_EQ(file_type_from_name("Q4_K"), FileType::Q4_K_M);  // llama-quantize's alias
  EXPECT_EQ(file_type_from_name("Q4_K_X"), std::nullopt);
  for (FileType t : quantize_file_types()) EXPECT_EQ(file_type_from_name(file_type_name(t)), t);
  EXPECT_EQ(quantize_file_types().size(), 18u);
}

}  // namespace
}  // namespace loom
