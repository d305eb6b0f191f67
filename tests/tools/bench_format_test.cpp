// loom bench: the output formats (md, csv, json, jsonl, sql) and the
// parameter lists (ranges, cartesian product, placement options).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench_format.h"
#include "bench_params.h"
#include "loom/error.h"

namespace loom::cli {
namespace {

BenchRecord sample_record(int64_t n_prompt, int64_t n_gen, std::string model = "llama 15M Q8_0") {
  return {
      {"build_commit", std::string("abc1234")},
      {"cpu_info", std::string("CPU \"x\", it's fast")},
      {"model_type", std::move(model)},
      {"model_size", int64_t{3 * 1024 * 1024}},
      {"model_n_params", int64_t{15'000'000}},
      {"n_threads", int64_t{2}},
      {"n_prompt", n_prompt},
      {"n_gen", n_gen},
      {"n_depth", int64_t{0}},
      {"avg_ts", 100.5},
      {"stddev_ts", 2.25},
      {"samples_ns", std::vector<int64_t>{1000, 2000}},
      {"samples_ts", std::vector<double>{99.0, 102.0}},
  };
}

std::string print_all(BenchFormat format, const std::vector<BenchRecord>& records,
                      std::vector<std::string> columns = {}) {
  auto p = make_bench_printer(format, std::move(columns));
  std::string out = p->begin();
  for (const auto& r : records) out += p->record(r);
  return out + p->end();
}

TEST(BenchFormat, Names) {
  EXPECT_EQ(bench_format_from_name("md"), BenchFormat::Markdown);
  EXPECT_EQ(bench_format_from_name("jsonl"), BenchFormat::Jsonl);
  EXPECT_EQ(bench_format_from_name("sql"), BenchFormat::Sql);
  EXPECT_FALSE(bench_format_from_name("xml"));
  EXPECT_EQ(bench_test_name(512, 0, 0), "pp512");
  EXPECT_EQ(bench_test_name(0, 128, 512), "tg128 @ d512");
  EXPECT_EQ(bench_test_name(512, 128, 0), "pp512+tg128");
}

TEST(BenchFormat, JsonIsAnArrayOfObjectsInFieldOrder) {
  const std::string out = print_all(BenchFormat::Json, {sample_record(512, 0), sample_record(0, 128)});
  const auto j = nlohmann::ordered_json::parse(out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0].begin().key(), "build_commit");
  EXPECT_EQ(j[1]["n_gen"], 128);
  EXPECT_EQ(j[0]["cpu_info"], "CPU \"x\", it's fast");
  EXPECT_EQ(j[0]["samples_ns"], nlohmann::ordered_json::array({1000, 2000}));
  EXPECT_DOUBLE_EQ(j[0]["avg_ts"].get<double>(), 100.5);
  EXPECT_EQ(nlohmann::json::parse(print_all(BenchFormat::Json, {})).size(), 0u);  // no records: []
}

TEST(BenchFormat, JsonlIsOneObjectPerLine) {
  const std::string out = print_all(BenchFormat::Jsonl, {sample_record(512, 0), sample_record(0, 128)});
  const size_t nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(out.substr(0, nl))["n_prompt"], 512);
  EXPECT_EQ(nlohmann::json::parse(out.substr(nl + 1))["n_gen"], 128);
  EXPECT_EQ(out.back(), '\n');
}

// Regression (issue 18): a model name that is not UTF-8 (GGUF metadata) made
// nlohmann throw type_error 316; the invalid byte becomes U+FFFD.
TEST(BenchFormat, JsonReplacesBytesThatAreNotUtf8) {
  for (BenchFormat f : {BenchFormat::Json, BenchFormat::Jsonl}) {
    const std::string out = print_all(f, {sample_record(512, 0, "llama \xff\xfe")});
    const std::string first = f == BenchFormat::Json ? out : out.substr(0, out.find('\n'));
    const auto j = nlohmann::json::parse(first);
    EXPECT_EQ((f == BenchFormat::Json ? j[0] : j)["model_type"], "llama \xEF\xBF\xBD\xEF\xBF\xBD");
  }
}

TEST(BenchFormat, CsvHasOneHeaderAndQuotesText) {
  const std::string out = print_all(BenchFormat::Csv, {sample_record(512, 0), sample_record(0, 128)});
  EXPECT_TRUE(out.starts_with("build_commit,cpu_info,model_type,model_size,"));
  EXPECT_EQ(out.find("build_commit", 1), std::string::npos);
  EXPECT_NE(out.find("\"CPU \"\"x\"\", it's fast\""), std::string::npos);
  EXPECT_NE(out.find(",100.5,2.25,\"1000 2000\",\"99 102\"\n"), std::string::npos);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3);
}

TEST(BenchFormat, SqlCreatesTheTableOnceAndEscapesQuotes) {
  const std::string out = print_all(BenchFormat::Sql, {sample_record(512, 0), sample_record(0, 128)});
  EXPECT_TRUE(out.starts_with("CREATE TABLE IF NOT EXISTS test (\n  build_commit TEXT,\n"));
  EXPECT_NE(out.find("  model_size INTEGER,\n"), std::string::npos);
  EXPECT_NE(out.find("  avg_ts REAL,\n"), std::string::npos);
  EXPECT_EQ(out.find("CREATE TABLE", 1), std::string::npos);
  EXPECT_NE(out.find("'CPU \"x\", it''s fast'"), std::string::npos);
  size_t inserts = 0;
  for (size_t at = out.find("INSERT INTO test ("); at != std::string::npos; at = out.find("INSERT INTO test (", at + 1))
    ++inserts;
  EXPECT_EQ(inserts, 2u);
}

TEST(BenchFormat, SqlWritesNonFiniteAsNull) {
  BenchRecord r = sample_record(16, 0);
  r.push_back({"bad", std::numeric_limits<double>::infinity()});
  EXPECT_NE(print_all(BenchFormat::Sql, {r}).find(", NULL);"), std::string::npos);
}

TEST(BenchFormat, MarkdownTable) {
  const std::string out = print_all(BenchFormat::Markdown, {sample_record(512, 0), sample_record(16, 4)},
                                    {"model_type", "model_size", "model_n_params", "n_threads"});
  EXPECT_NE(out.find("| model"), std::string::npos);
  EXPECT_NE(out.find("size |"), std::string::npos);
  EXPECT_NE(out.find("pp512 |"), std::string::npos);
  EXPECT_NE(out.find("pp16+tg4 |"), std::string::npos);
  EXPECT_NE(out.find("100.50 ± 2.25 |"), std::string::npos);
  EXPECT_NE(out.find("3.00 MiB"), std::string::npos);
  EXPECT_NE(out.find("15.00 M"), std::string::npos);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 4);  // header, rule, two rows
}

TEST(BenchParams, ListsAndRanges) {
  EXPECT_EQ(parse_int_list("-p", "512"), (std::vector<int>{512}));
  EXPECT_EQ(parse_int_list("-p", "1,2,4"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(parse_int_list("-t", "1-4"), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(parse_int_list("-p", "16-128*2"), (std::vector<int>{16, 32, 64, 128}));
  EXPECT_EQ(parse_int_list("-d", "0-1024+512,7"), (std::vector<int>{0, 512, 1024, 7}));
  EXPECT_THROW(parse_int_list("-p", "x"), Error);
  EXPECT_THROW(parse_int_list("-p", "8-4"), Error);
  EXPECT_THROW(parse_int_list("-p", "0-8*2"), Error);
  EXPECT_THROW(parse_int_list("-p", "-3"), Error);
  EXPECT_THROW(parse_int_list("-p", ","), Error);
  // Regression (issue 18): ranges were expanded without bound (std::bad_alloc after 30 s).
  EXPECT_EQ(parse_int_list("-d", "1-1024").size(), kMaxListValues);
  for (const char* big : {"0-51212222", "0-1000000000", "1-1024,5", "0-1000000000+1"}) {
    try {
      parse_int_list("-d", big);
      ADD_FAILURE() << big << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("-d: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("at most 1024"), std::string::npos) << e.what();
    }
  }
}

TEST(BenchParams, CartesianProductKeepsEachModelTogether) {
  BenchParams p;
  p.models = {"a.gguf", "b.gguf"};
  p.n_prompt = {16, 32};
  p.n_gen = {4};
  p.prompt_gen = {{8, 2}};
  p.n_depth = {0, 64};
  p.n_threads = {1, 2};
  p.validate();
  const auto runs = p.instances(2);
  ASSERT_EQ(runs.size(), 2u * 2u * 2u * 4u);  // models x threads x depths x (2 pp + tg + pg)
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load.model, i < runs.size() / 2 ? "a.gguf" : "b.gguf");
  EXPECT_EQ(runs[0].n_prompt, 16);
  EXPECT_EQ(runs[2].n_gen, 4);
  EXPECT_EQ(runs[3].n_prompt, 8);
  EXPECT_EQ(runs[3].n_gen, 2);
  EXPECT_EQ(runs[4].n_depth, 64);
}

TEST(BenchParams, NCpuMoeIsPartOfTheLoad) {
  BenchParams p;
  p.models = {"m.gguf"};
  p.n_prompt = {8};
  p.n_gen = {0};
  p.n_cpu_moe = {0, 3};
  p.cpu_moe = true;
  const auto runs = p.instances(1);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].load.n_cpu_moe, 0);
  EXPECT_EQ(runs[1].load.n_cpu_moe, 3);
  EXPECT_TRUE(runs[0].load.cpu_moe && runs[1].load.cpu_moe);
  EXPECT_FALSE(runs[0].load == runs[1].load);  // two loads
}

TEST(BenchParams, PlacementValuesAreCheckedBeforeAnyRun) {
  BenchParams p;
  p.models = {"m.gguf"};
  p.n_gpu_layers = {0, 99};
  p.split_mode = {"none", "layer", "row"};
  p.tensor_split = {"", "3/1"};
  p.override_tensors = {"", "ffn_.*=CPU,attn=CPU"};
  EXPECT_NO_THROW(p.validate());
  const PlacementOptions o = placement_options({"m.gguf", true, 99, "row", 1, "3/1", "ffn_.*=CPU,attn=CPU"});
  EXPECT_EQ(o.n_gpu_layers, 99);
  EXPECT_EQ(o.split_mode, SplitMode::Row);
  EXPECT_EQ(o.main_gpu, 1);
  EXPECT_EQ(o.tensor_split, (std::vector<float>{3.0f, 1.0f}));
  ASSERT_EQ(o.overrides.size(), 2u);
  EXPECT_EQ(o.overrides[1].pattern, "attn");
  EXPECT_EQ(o.overrides[1].buffer_type, "CPU");
  p.split_mode = {"diagonal"};
  try {
    p.validate();
    FAIL() << "-sm diagonal accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("diagonal"), std::string::npos);
  }
  p.split_mode = {"layer"};
  p.tensor_split = {"3/x"};
  EXPECT_THROW(p.validate(), Error);
  p.tensor_split = {""};
  p.override_tensors = {"no-equals-sign"};
  EXPECT_THROW(p.validate(), Error);
  p.override_tensors = {""};
  // -ncmoe and --cpu-moe add llama.cpp's expert overrides after -ot's.
  const PlacementOptions moe = placement_options({"m.gguf", true, 99, "layer", 0, "", "attn=CPU", 2, true});
  ASSERT_EQ(moe.overrides.size(), 4u);
  EXPECT_EQ(moe.overrides[0].pattern, "attn");
  EXPECT_EQ(moe.overrides[1].pattern, "\\.ffn_(up|down|gate|gate_up)_(ch|)exps");
  EXPECT_EQ(moe.overrides[3].pattern, "blk\\.1\\.ffn_(up|down|gate|gate_up)_(ch|)exps");
  EXPECT_EQ(moe.overrides[3].buffer_type, "CPU");
  p.n_prompt = {0};
  p.n_gen = {0};
  EXPECT_THROW(p.validate(), Error);  // nothing to run
}

}  // namespace
}  // namespace loom::cli
