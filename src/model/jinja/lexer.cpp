#include "lexer.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "loom/error.h"

namespace loom::jinja {

void syntax_error(Pos pos, const std::string& message) {
  fail("template line {}, column {}: {}", pos.line, pos.column, message);
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    if (!src_.empty() && src_.back() == '\n') src_.remove_suffix(1);
    line_starts_.push_back(0);
    for (size_t k = 0; k < src_.size(); ++k)
      if (src_[k] == '\n') line_starts_.push_back(k + 1);
  }

  std::vector<Token> run() {
    size_t k = 0;
    bool trim_newline = false;     // trim_blocks after a block or comment tag
    bool strip_leading = false;    // a "-" closed the previous tag
    while (k < src_.size()) {
      size_t t = next_tag(k);
      std::string_view segment = src_.substr(k, t - k);
      const size_t seg_start = k;
      std::string_view text = segment;
      if (trim_newline && !text.empty() && text.front() == '\n') text.remove_prefix(1);
      if (strip_leading)
        while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
      if (t < src_.size()) {
        const char kind = src_[t + 1];
        const bool minus = t + 2 < src_.size() && src_[t + 2] == '-';
        if (kind != '{') {  // lstrip_blocks, for block and comment tags at the start of a line
          const size_t nl = segment.rfind('\n');
          if (nl != std::string_view::npos || seg_start == 0) {
            const size_t tail = nl == std::string_view::npos ? 0 : nl + 1;
            if (std::all_of(segment.begin() + tail, segment.end(), [](char c) { return c == ' ' || c == '\t'; })) {
              const size_t cut = segment.size() - tail;
              text.remove_suffix(std::min(cut, text.size()));
            }
          }
        }
        if (minus)
          while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
      }
      if (!text.empty()) tokens_.push_back({Token::Type::Text, std::string(text), pos_of(seg_start)});
      if (t >= src_.size()) break;
      k = t;
      const char kind = src_[k + 1];
      if (kind == '#') {
        const size_t end = src_.find("#}", k + 2);
        if (end == std::string_view::npos) syntax_error(pos_of(k), "comment '{#' is never closed with '#}'");
        strip_leading = src_[end - 1] == '-' && end - 1 >= k + 2;
        trim_newline = true;
        k = end + 2;
        continue;
      }
      k = lex_tag(k, kind == '%', strip_leading);
      trim_newline = kind == '%';
      if (kind == '%' && ends_with_raw_tag()) k = take_raw(k, strip_leading);
    }
    tokens_.push_back({Token::Type::End, "", pos_of(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t k = src_.find('{', from); k != std::string_view::npos; k = src_.find('{', k + 1))
      if (k + 1 < src_.size() && (src_[k + 1] == '%' || src_[k + 1] == '{' || src_[k + 1] == '#')) return k;
    return src_.size();
  }

  Pos pos_of(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return {static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(offset - *it) + 1};
  }

  // Lexes one {% %} or {{ }} tag starting at k; returns the offset after it.
  size_t lex_tag(size_t k, bool statement, bool& strip_after) {
    const Pos open = pos_of(k);
    tokens_.push_back({statement ? Token::Type::OpenStatement : Token::Type::OpenExpression, "", open});
    k += 2;
    if (k < src_.size() && src_[k] == '-') ++k;
    int depth = 0;  // {} nesting, so that "}}" inside a dict literal does not close the tag
    const char close = statement ? '%' : '}';
    while (true) {
      while (k < src_.size() && is_space(src_[k])) ++k;
      if (k >= src_.size())
        syntax_error(open, statement ? "tag '{%' is never closed with '%}'" : "tag '{{' is never closed with '}}'");
      const Pos p = pos_of(k);
      const std::string_view rest = src_.substr(k);
      const bool minus = rest.size() >= 3 && rest[0] == '-' && rest[1] == close && rest[2] == '}';
      if (minus || (rest.size() >= 2 && rest[0] == close && rest[1] == '}' && (statement || depth == 0))) {
        tokens_.push_back({statement ? Token::Type::CloseStatement : Token::Type::CloseExpression, "", p});
        strip_after = minus;
        return k + (minus ? 3 : 2);
      }
      const char c = rest[0];
      if (c == '"' || c == '\'') {
        k = lex_string(k);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = k;
        while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
        const bool after_dot = !tokens_.empty() && tokens_.back().type == Token::Type::Op && tokens_.back().text == ".";
        if (!after_dot && e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
          ++e;
          while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
          tokens_.push_back({Token::Type::Float, std::string(src_.substr(k, e - k)), p});
        } else {
          tokens_.push_back({Token::Type::Int, std::string(src_.substr(k, e - k)), p});
        }
        k = e;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = k;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        tokens_.push_back({Token::Type::Name, std::string(src_.substr(k, e - k)), p});
        k = e;
      } else {
        static constexpr std::string_view kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
        std::string op;
        for (auto two : kTwo)
          if (rest.substr(0, 2) == two) op = two;
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=|.,:()[]{}").find(c) == std::string_view::npos)
            syntax_error(p, fmt::format("unexpected character '{}'", c));
          op = std::string(1, c);
          if (c == '{') ++depth;
          if (c == '}') --depth;
        }
        tokens_.push_back({Token::Type::Op, op, p});
        k += op.size();
      }
    }
  }

  bool ends_with_raw_tag() const {
    const size_t n = tokens_.size();
    return n >= 3 && tokens_[n - 3].type == Token::Type::OpenStatement && tokens_[n - 2].type == Token::Type::Name &&
           tokens_[n - 2].text == "raw" && tokens_[n - 1].type == Token::Type::CloseStatement;
  }

  // The end of an "{% endraw %}" tag starting at k ("-" markers allowed), or npos.
  size_t endraw_tag_end(size_t k, bool& minus_before, bool& minus_after) const {
    size_t e = k + 2;
    minus_before = e < src_.size() && src_[e] == '-';
    if (minus_before) ++e;
    while (e < src_.size() && is_space(src_[e])) ++e;
    if (src_.substr(e, 6) != "endraw") return std::string_view::npos;
    e += 6;
    while (e < src_.size() && is_space(src_[e])) ++e;
    minus_after = e < src_.size() && src_[e] == '-';
    if (minus_after) ++e;
    return src_.substr(e, 2) == "%}" ? e + 2 : std::string_view::npos;
  }

  // After "{% raw %}" (its three tokens just lexed, k past it): the text up to
  // "{% endraw %}" becomes one Text token, tags in it left as they are.
  // Whitespace control as in Jinja: "-" markers on both tags and lstrip_blocks
  // before "{% endraw %}" apply, trim_blocks after "{% raw %}" does not.
  size_t take_raw(size_t k, bool& strip_leading) {
    const Pos open = tokens_[tokens_.size() - 3].pos;
    tokens_.resize(tokens_.size() - 3);
    bool minus_before = false, minus_after = false;
    size_t start = k, end = std::string_view::npos;
    for (start = src_.find("{%", k); start != std::string_view::npos; start = src_.find("{%", start + 2))
      if ((end = endraw_tag_end(start, minus_before, minus_after)) != std::string_view::npos) break;
    if (end == std::string_view::npos) syntax_error(open, "'{% raw %}' is never closed with '{% endraw %}'");
    const std::string_view segment = src_.substr(k, start - k);
    std::string_view text = segment;
    if (strip_leading)
      while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    const size_t nl = segment.rfind('\n');  // lstrip_blocks before "{% endraw %}"
    if (nl != std::string_view::npos &&
        std::all_of(segment.begin() + nl + 1, segment.end(), [](char c) { return c == ' ' || c == '\t'; }))
      text.remove_suffix(std::min(segment.size() - nl - 1, text.size()));
    if (minus_before)
      while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    if (!text.empty()) tokens_.push_back({Token::Type::Text, std::string(text), pos_of(k)});
    strip_leading = minus_after;
    return end;
  }

  size_t lex_string(size_t k) {
    const Pos p = pos_of(k);
    const char quote = src_[k++];
    std::string out;
    while (true) {
      if (k >= src_.size()) syntax_error(p, "string literal is never closed");
      const char c = src_[k++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (k >= src_.size()) syntax_error(p, "string literal is never closed");
      const char e = src_[k++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'x':
        case 'u': {
          const size_t n = e == 'x' ? 2 : 4;
          if (k + n > src_.size() || !std::all_of(src_.begin() + k, src_.begin() + k + n, [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); }))
            syntax_error(p, fmt::format("invalid escape sequence '\\{}' in string literal", e));
          const uint32_t cp = std::stoul(std::string(src_.substr(k, n)), nullptr, 16);
          k += n;
          append_utf8(out, cp);
          break;
        }
        default: syntax_error(p, fmt::format("unknown escape sequence '\\{}' in string literal", e));
      }
    }
    tokens_.push_back({Token::Type::String, std::move(out), p});
    return k;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace loom::jinja
