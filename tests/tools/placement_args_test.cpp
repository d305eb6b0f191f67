// The CLI's placement flags (-ngl, -sm, -ts, -mg, -ot) and its one list split:
// parse errors name the flag, and so do the loader's placement errors once
// the CLI has told them.
#include <gtest/gtest.h>

#include <filesystem>

#include "args.h"
#include "loom/error.h"
#include "model_gen/model_gen.h"
#include "placement_args.h"

namespace loom::cli {
namespace {

TEST(SplitList, DropsEmptyItemsUnlessAskedToKeepThem) {
  using List = std::vector<std::string>;
  EXPECT_EQ(split_list("a,b,c"), (List{"a", "b", "c"}));
  EXPECT_EQ(split_list("a,,b,"), (List{"a", "b"}));
  EXPECT_EQ(split_list(""), List{});
  EXPECT_EQ(split_list(","), List{});
  EXPECT_EQ(split_list("x=1;y=2", ';'), (List{"x=1", "y=2"}));
  // Kept for a parser to refuse; a trailing separator still adds nothing.
  EXPECT_EQ(split_list("3,,1", ',', true), (List{"3", "", "1"}));
  EXPECT_EQ(split_list("3,1,", ',', true), (List{"3", "1"}));
  EXPECT_EQ(split_list(",3", ',', true), (List{"", "3"}));
  EXPECT_EQ(split_list("", ',', true), List{});
}

// Runs `f`, which must throw a loom::Error whose message starts with `prefix`.
template <class F>
void expect_error_starting(F f, const std::string& prefix) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one starting with '" << prefix << "'";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
  }
}

TEST(PlacementFlags, ParseErrorsNameTheFlag) {
  EXPECT_EQ(parse_split_mode("row"), SplitMode::Row);
  expect_error_starting([] { parse_split_mode("rows"); }, "-sm: unknown split mode 'rows'");
  EXPECT_EQ(parse_tensor_split("3,1"), (std::vector<float>{3.0f, 1.0f}));
  expect_error_starting([] { parse_tensor_split("3,x"); }, "-ts: 'x' is not a non-negative number");
  expect_error_starting([] { parse_tensor_split("3,,1"); }, "-ts: '' is not a non-negative number");
  expect_error_starting([] { parse_tensor_split("0,0"); }, "-ts: '0,0' needs at least one positive proportion");
  // Regression (issue 18): nan and inf were accepted as proportions.
  expect_error_starting([] { parse_tensor_split("nan"); }, "-ts: 'nan' is not a non-negative number");
  expect_error_starting([] { parse_tensor_split("inf,1"); }, "-ts: 'inf' is not a non-negative number");
  const TensorOverride o = parse_override("blk\\.1\\.ffn=CPU");
  EXPECT_EQ(o.pattern, "blk\\.1\\.ffn");
  EXPECT_EQ(o.buffer_type, "CPU");
  expect_error_starting([] { parse_override("noequals"); }, "-ot: 'noequals' is not PATTERN=BUFFER_TYPE");
}

// --cpu-moe and --n-cpu-moe N are llama.cpp's -ot shorthands: its expert
// pattern (common.h LLM_FFN_EXPS_REGEX) with the CPU buffer type, for every
// layer or per layer blk.0 .. blk.N-1.
TEST(PlacementFlags, CpuMoeShorthandsAreLlamaCppsOverrides) {
  const std::vector<TensorOverride> all = cpu_moe_overrides();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].pattern, "\\.ffn_(up|down|gate|gate_up)_(ch|)exps");
  EXPECT_EQ(all[0].buffer_type, "CPU");
  const std::vector<TensorOverride> first = n_cpu_moe_overrides(3);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].pattern, "blk\\.0\\.ffn_(up|down|gate|gate_up)_(ch|)exps");
  EXPECT_EQ(first[2].pattern, "blk\\.2\\.ffn_(up|down|gate|gate_up)_(ch|)exps");
  for (const auto& o : first) EXPECT_EQ(o.buffer_type, "CPU");
  EXPECT_TRUE(n_cpu_moe_overrides(0).empty());
  expect_error_starting([] { n_cpu_moe_overrides(-1); }, "--n-cpu-moe: -1 layers: the count must not be negative");
}

TEST(PlacementFlags, LoaderErrorsAreToldAsTheirFlag) {
  EXPECT_EQ(placement_flag(PlacementField::NGpuLayers), "-ngl");
  EXPECT_EQ(placement_flag(PlacementField::TensorSplit), "-ts");
  EXPECT_EQ(placement_flag(PlacementField::MainGpu), "-mg");
  EXPECT_EQ(placement_flag(PlacementField::Overrides), "-ot");
  const std::string path =
      (std::filesystem::temp_directory_path() / ("loom_placement_args_" + std::to_string(::getpid()) + ".gguf")).string();
  ModelSpec s;
  s.n_vocab = 300;
  s.n_embd = 32;
  s.n_layer = 2;
  s.n_head = 2;
  s.n_head_kv = 2;
  s.n_ff = 64;
  s.n_ctx = 32;
  write_random_model(s, DType::F32, 1, path);
  EXPECT_NO_THROW(load_model(path, {}));
  expect_error_starting([&] { load_model(path, {.placement = {.n_gpu_layers = -1}}); },
                        "-ngl: the number of offloaded layers must not be negative");
  expect_error_starting([&] { load_model(path, {.placement = {.overrides = {{"ffn", "NoSuchType"}}}}); },
                        "-ot: tensor override 'ffn=NoSuchType'");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace loom::cli
