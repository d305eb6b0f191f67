#include "bench_format.h"

#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace loom::cli {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;  // clang 14 has no aggregate deduction

std::string number_text(double v) { return std::isfinite(v) ? fmt::format("{}", v) : std::string(); }

template <class T>
std::string join(const std::vector<T>& values) {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) out += ' ';
    if constexpr (std::is_same_v<T, double>)
      out += number_text(v);
    else
      out += fmt::format("{}", v);
  }
  return out;
}

// The value as plain text (lists space-separated); empty for NaN/inf.
std::string plain_text(const BenchValue& v) {
  return std::visit(Overloaded{[](int64_t x) { return fmt::format("{}", x); },
                               [](double x) { return number_text(x); },
                               [](const std::string& s) { return s; },
                               [](const std::vector<int64_t>& l) { return join(l); },
                               [](const std::vector<double>& l) { return join(l); }},
                    v);
}

bool is_numeric(const BenchValue& v) { return std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v); }

int64_t int_field(const BenchRecord& r, std::string_view name) {
  const BenchValue* v = find_field(r, name);
  if (v && std::holds_alternative<int64_t>(*v)) return std::get<int64_t>(*v);
  return 0;
}

double double_field(const BenchRecord& r, std::string_view name) {
  const BenchValue* v = find_field(r, name);
  if (v && std::holds_alternative<double>(*v)) return std::get<double>(*v);
  return std::nan("");
}

nlohmann::ordered_json to_json(const BenchRecord& r) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& f : r) {
    std::visit(Overloaded{[&](double x) { j[f.name] = std::isfinite(x) ? nlohmann::ordered_json(x) : nullptr; },
                          [&](const auto& x) { j[f.name] = x; }},
               f.value);
  }
  return j;
}

class JsonPrinter : public BenchPrinter {
 public:
  explicit JsonPrinter(bool lines) : lines_(lines) {}
  std::string begin() override { return lines_ ? "" : "["; }
  std::string record(const BenchRecord& r) override {
    // Strings from the model file or the command line need not be UTF-8:
    // invalid bytes become U+FFFD rather than a type_error.
    const std::string text =
        to_json(r).dump(lines_ ? -1 : 2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    if (lines_) return text + "\n";
    return (first_ ? (first_ = false, "\n") : ",\n") + text;
  }
  std::string end() override { return lines_ ? "" : "\n]\n"; }

 private:
  bool lines_;
  bool first_ = true;
};

std::string csv_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

class CsvPrinter : public BenchPrinter {
 public:
  std::string record(const BenchRecord& r) override {
    std::string out;
    if (!header_done_) {
      for (size_t i = 0; i < r.size(); ++i) out += (i ? "," : "") + r[i].name;
      out += "\n";
      header_done_ = true;
    }
    for (size_t i = 0; i < r.size(); ++i) {
      if (i) out += ",";
      out += is_numeric(r[i].value) ? plain_text(r[i].value) : csv_quote(plain_text(r[i].value));
    }
    return out + "\n";
  }

 private:
  bool header_done_ = false;
};

std::string sql_literal(const BenchValue& v) {
  if (const double* d = std::get_if<double>(&v); d && !std::isfinite(*d)) return "NULL";
  if (is_numeric(v)) return plain_text(v);
  std::string out = "'";
  for (char c : plain_text(v)) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

const char* sql_type(const BenchValue& v) {
  if (std::holds_alternative<int64_t>(v)) return "INTEGER";
  if (std::holds_alternative<double>(v)) return "REAL";
  return "TEXT";
}

class SqlPrinter : public BenchPrinter {
 public:
  std::string record(const BenchRecord& r) override {
    std::string out, names;
    for (size_t i = 0; i < r.size(); ++i) names += (i ? ", " : "") + r[i].name;
    if (!table_done_) {
      out += "CREATE TABLE IF NOT EXISTS test (\n";
      for (size_t i = 0; i < r.size(); ++i)
        out += fmt::format("  {} {}{}\n", r[i].name, sql_type(r[i].value), i + 1 < r.size() ? "," : "");
      out += ");\n";
      table_done_ = true;
    }
    out += fmt::format("INSERT INTO test ({}) VALUES (", names);
    for (size_t i = 0; i < r.size(); ++i) out += (i ? ", " : "") + sql_literal(r[i].value);
    return out + ");\n";
  }

 private:
  bool table_done_ = false;
};

std::string human_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
}

std::string human_count(int64_t n) {
  const double x = static_cast<double>(n);
  if (x >= 1e9) return fmt::format("{:.2f} B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.2f} M", x / 1e6);
  return fmt::format("{:.2f} K", x / 1e3);
}

class MarkdownPrinter : public BenchPrinter {
 public:
  explicit MarkdownPrinter(std::vector<std::string> columns) : columns_(std::move(columns)) {}

  std::string begin() override {
    std::string head = "|", rule = "|";
    for (const auto& c : columns_) {
      head += " " + pad(label(c), width(c), align_right(c)) + " |";
      rule += fmt::format(" {:->{}} |", align_right(c) ? ":" : "", width(c));
    }
    head += fmt::format(" {:>{}} | {:>{}} |\n", "test", kTestWidth, "t/s", kRateWidth);
    rule += fmt::format(" {:->{}} | {:->{}} |\n", ":", kTestWidth, ":", kRateWidth);
    return head + rule;
  }

  std::string record(const BenchRecord& r) override {
    std::string out = "|";
    for (const auto& c : columns_) out += " " + pad(cell(r, c), width(c), align_right(c)) + " |";
    const std::string test = bench_test_name(int_field(r, "n_prompt"), int_field(r, "n_gen"), int_field(r, "n_depth"));
    const std::string rate = fmt::format("{:.2f} ± {:.2f}", double_field(r, "avg_ts"), double_field(r, "stddev_ts"));
    // "±" is two bytes but one column: pad by one more.
    out += fmt::format(" {:>{}} | {:>{}} |\n", test, kTestWidth, rate, kRateWidth + 1);
    return out;
  }

 private:
  static constexpr int kTestWidth = 16;
  static constexpr int kRateWidth = 20;

  static std::string label(const std::string& field) {
    static const std::map<std::string, std::string> labels = {
        {"model_type", "model"}, {"model_size", "size"}, {"model_n_params", "params"},
        {"n_threads", "threads"}, {"use_mmap", "mmap"}, {"n_gpu_layers", "ngl"}, {"n_cpu_moe", "ncmoe"},
        {"cpu_moe", "cmoe"},
        {"split_mode", "sm"}, {"tensor_split", "ts"}, {"override_tensors", "ot"}};
    auto it = labels.find(field);
    return it == labels.end() ? field : it->second;
  }
  static int width(const std::string& field) {
    if (field == "model_type" || field == "model_filename") return 28;
    if (field == "devices") return 12;
    return std::max<int>(static_cast<int>(label(field).size()), 10);
  }
  static bool align_right(const std::string& field) {
    return field != "model_type" && field != "model_filename" && field != "devices" && field != "split_mode" &&
           field != "tensor_split" && field != "override_tensors";
  }
  static std::string pad(const std::string& text, int width, bool right) {
    return right ? fmt::format("{:>{}}", text, width) : fmt::format("{:<{}}", text, width);
  }
  static std::string cell(const BenchRecord& r, const std::string& field) {
    const BenchValue* v = find_field(r, field);
    if (!v) return "";
    if (field == "model_size" && std::holds_alternative<int64_t>(*v)) return human_bytes(std::get<int64_t>(*v));
    if (field == "model_n_params" && std::holds_alternative<int64_t>(*v)) return human_count(std::get<int64_t>(*v));
    return plain_text(*v);
  }

  std::vector<std::string> columns_;
};

}  // namespace

const BenchValue* find_field(const BenchRecord& record, std::string_view name) {
  for (const auto& f : record)
    if (f.name == name) return &f.value;
  return nullptr;
}

std::optional<BenchFormat> bench_format_from_name(std::string_view name) {
  if (name == "md") return BenchFormat::Markdown;
  if (name == "csv") return BenchFormat::Csv;
  if (name == "json") return BenchFormat::Json;
  if (name == "jsonl") return BenchFormat::Jsonl;
  if (name == "sql") return BenchFormat::Sql;
  return std::nullopt;
}

std::unique_ptr<BenchPrinter> make_bench_printer(BenchFormat format, std::vector<std::string> md_columns) {
  switch (format) {
    case BenchFormat::Markdown: return std::make_unique<MarkdownPrinter>(std::move(md_columns));
    case BenchFormat::Csv: return std::make_unique<CsvPrinter>();
    case BenchFormat::Json: return std::make_unique<JsonPrinter>(false);
    case BenchFormat::Jsonl: return std::make_unique<JsonPrinter>(true);
    case BenchFormat::Sql: return std::make_unique<SqlPrinter>();
  }
  return nullptr;
}

std::string bench_test_name(int64_t n_prompt, int64_t n_gen, int64_t n_depth) {
  std::string name;
  if (n_prompt > 0) name = fmt::format("pp{}", n_prompt);
  if (n_gen > 0) name += fmt::format("{}tg{}", name.empty() ? "" : "+", n_gen);
  if (n_depth > 0) name += fmt::format(" @ d{}", n_depth);
  return name;
}

}  // namespace loom::cli
