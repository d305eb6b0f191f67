// loom bench output: one record per test (an ordered list of named values)
// written as a Markdown table, CSV, JSON, JSON lines or SQL (CREATE TABLE IF
// NOT EXISTS + INSERTs, to pipe into sqlite3). Printers stream: begin() before
// the first record, record() per test as it finishes, end() after the last.
// Depends on nothing but the standard library, fmt and nlohmann_json, so the
// unit tests can link it alone.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loom::cli {

// Lists are written as space-separated text in CSV/SQL/Markdown, as arrays in JSON.
using BenchValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;

struct BenchField {
  std::string name;
  BenchValue value;
};

using BenchRecord = std::vector<BenchField>;

const BenchValue* find_field(const BenchRecord& record, std::string_view name);

enum class BenchFormat { Markdown, Csv, Json, Jsonl, Sql };

// "md", "csv", "json", "jsonl", "sql"; nullopt for anything else.
std::optional<BenchFormat> bench_format_from_name(std::string_view name);

class BenchPrinter {
 public:
  virtual ~BenchPrinter() = default;
  virtual std::string begin() { return {}; }
  virtual std::string record(const BenchRecord& record) = 0;
  virtual std::string end() { return {}; }
};

// `md_columns`: the fields the Markdown table shows before "test" and "t/s"
// (other formats write every field). The Markdown "test" column is made from
// n_prompt, n_gen and n_depth; "t/s" from avg_ts and stddev_ts.
std::unique_ptr<BenchPrinter> make_bench_printer(BenchFormat format, std::vector<std::string> md_columns = {});

// "pp512", "tg128", "pp512+tg128", with " @ d512" when depth > 0.
std::string bench_test_name(int64_t n_prompt, int64_t n_gen, int64_t n_depth);

}  // namespace loom::cli
