#include "parser.h"

#include <fmt/format.h>

#include "lexer.h"

namespace loom::jinja {
namespace {

using T = Token::Type;

ExprPtr make(Expr::Kind kind, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body run() {
    Body body = parse_body({});
    if (peek().type != T::End) syntax_error(peek().pos, "unexpected '" + peek_statement_name() + "'");
    return body;
  }

 private:
  // ---- token helpers
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(at_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(at_++, toks_.size() - 1)]; }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).type == T::Op && peek(ahead).text == op; }
  bool is_name(const char* name, size_t ahead = 0) const { return peek(ahead).type == T::Name && peek(ahead).text == name; }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case T::End: return "end of template";
      case T::Text: return "text";
      case T::OpenStatement: return "'{%'";
      case T::CloseStatement: return "'%}'";
      case T::OpenExpression: return "'{{'";
      case T::CloseExpression: return "'}}'";
      case T::String: return "string literal";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) syntax_error(peek().pos, fmt::format("expected '{}', found {}", op, describe(peek())));
    ++at_;
  }
  void expect(T type, const char* what) {
    if (peek().type != type) syntax_error(peek().pos, fmt::format("expected {}, found {}", what, describe(peek())));
    ++at_;
  }
  std::string expect_name() {
    if (peek().type != T::Name) syntax_error(peek().pos, fmt::format("expected a name, found {}", describe(peek())));
    return next().text;
  }
  std::string peek_statement_name() const { return peek().type == T::OpenStatement ? peek(1).text : describe(peek()); }

  struct Deeper {
    explicit Deeper(Parser& p) : p(p) {
      if (++p.depth_ > kMaxParseDepth)
        syntax_error(p.peek().pos, fmt::format("nesting deeper than {} levels", kMaxParseDepth));
    }
    ~Deeper() { --p.depth_; }
    Parser& p;
  };

  // ---- statements
  // Parses until a {% NAME %} with NAME in `ends` (left unconsumed) or the end.
  Body parse_body(std::initializer_list<const char*> ends, const char* opener = "", Pos opened = {}) {
    Deeper guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == T::End) {
        if (ends.size() != 0)
          syntax_error(opened, fmt::format("'{}' is never closed with '{{% {} %}}'", opener, *ends.begin()));
        return body;
      }
      if (t.type == T::Text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Text;
        n->pos = t.pos;
        n->text = t.text;
        body.push_back(std::move(n));
        ++at_;
      } else if (t.type == T::OpenExpression) {
        ++at_;
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Output;
        n->pos = t.pos;
        n->expr = parse_expression();
        expect(T::CloseExpression, "'}}'");
        body.push_back(std::move(n));
      } else if (t.type == T::OpenStatement) {
        for (const char* e : ends)
          if (is_name(e, 1)) return body;
        ++at_;
        if (auto n = parse_statement()) body.push_back(std::move(n));
      } else {
        syntax_error(t.pos, "unexpected " + describe(t));
      }
    }
  }

  void end_tag(const char* name) {
    expect(T::OpenStatement, "'{%'");
    if (!is_name(name)) syntax_error(peek().pos, fmt::format("expected '{}', found {}", name, describe(peek())));
    ++at_;
    expect(T::CloseStatement, "'%}'");
  }

  std::unique_ptr<Node> parse_statement() {
    const Pos pos = peek().pos;
    const std::string keyword = expect_name();
    auto n = std::make_unique<Node>();
    n->pos = pos;
    if (keyword == "if") {
      n->kind = Node::Kind::If;
      parse_if_rest(*n);
      return n;
    }
    if (keyword == "for") {
      n->kind = Node::Kind::For;
      n->target = parse_target();
      if (!is_name("in")) syntax_error(peek().pos, fmt::format("expected 'in', found {}", describe(peek())));
      ++at_;
      n->expr = parse_or();
      if (is_name("if")) {
        ++at_;
        n->condition = parse_or();
      }
      if (is_name("recursive")) {
        ++at_;
        n->recursive = true;
      }
      expect(T::CloseStatement, "'%}'");
      n->body = parse_body({"endfor", "else"}, "for", pos);
      if (is_name("else", 1)) {
        at_ += 2;
        expect(T::CloseStatement, "'%}'");
        n->else_body = parse_body({"endfor"}, "for", pos);
      }
      end_tag("endfor");
      return n;
    }
    if (keyword == "set") {
      n->target = parse_target(true);
      if (is_op("=")) {
        ++at_;
        n->kind = Node::Kind::Set;
        n->expr = parse_tuple_or_expression();
        expect(T::CloseStatement, "'%}'");
      } else {
        n->kind = Node::Kind::SetBlock;
        expect(T::CloseStatement, "'=' or '%}'");
        n->body = parse_body({"endset"}, "set", pos);
        end_tag("endset");
      }
      return n;
    }
    if (keyword == "macro") {
      n->kind = Node::Kind::Macro;
      n->text = expect_name();
      n->params = parse_params();
      expect(T::CloseStatement, "'%}'");
      n->body = parse_body({"endmacro"}, "macro", pos);
      end_tag("endmacro");
      return n;
    }
    if (keyword == "call") {
      n->kind = Node::Kind::CallBlock;
      if (is_op("(")) n->params = parse_params();
      n->expr = parse_expression();
      if (n->expr->kind != Expr::Kind::Call) syntax_error(n->expr->pos, "'call' needs a macro call");
      expect(T::CloseStatement, "'%}'");
      n->body = parse_body({"endcall"}, "call", pos);
      end_tag("endcall");
      return n;
    }
    if (keyword == "filter") {
      n->kind = Node::Kind::FilterBlock;
      n->filter = parse_filter(nullptr);
      expect(T::CloseStatement, "'%}'");
      n->body = parse_body({"endfilter"}, "filter", pos);
      end_tag("endfilter");
      return n;
    }
    if (keyword == "break" || keyword == "continue") {
      n->kind = keyword == "break" ? Node::Kind::Break : Node::Kind::Continue;
      expect(T::CloseStatement, "'%}'");
      return n;
    }
    if (keyword == "generation" || keyword == "endgeneration") {  // transformers' assistant-mask markers: no output
      expect(T::CloseStatement, "'%}'");
      return nullptr;
    }
    if (keyword.rfind("end", 0) == 0 || keyword == "elif" || keyword == "else")
      syntax_error(pos, fmt::format("'{}' without a matching opening tag", keyword));
    syntax_error(pos, fmt::format("unknown or unsupported statement '{}'", keyword));
  }

  void parse_if_rest(Node& n) {
    n.expr = parse_tuple_or_expression();
    expect(T::CloseStatement, "'%}'");
    n.body = parse_body({"endif", "elif", "else"}, "if", n.pos);
    if (is_name("elif", 1)) {
      at_ += 1;
      auto alt = std::make_unique<Node>();
      alt->kind = Node::Kind::If;
      alt->pos = next().pos;
      parse_if_rest(*alt);  // consumes the endif
      n.else_body.push_back(std::move(alt));
      return;
    }
    if (is_name("else", 1)) {
      at_ += 2;
      expect(T::CloseStatement, "'%}'");
      n.else_body = parse_body({"endif"}, "if", n.pos);
    }
    end_tag("endif");
  }

  // A name, a.b (set only) or a tuple of names, for for/set.
  ExprPtr parse_target(bool allow_attribute = false) {
    const Pos pos = peek().pos;
    auto one = [&]() {
      auto e = make(Expr::Kind::Name, peek().pos);
      e->name = expect_name();
      if (allow_attribute && is_op(".")) {
        ++at_;
        auto a = make(Expr::Kind::Attribute, e->pos);
        a->name = expect_name();
        a->object = std::move(e);
        return a;
      }
      return e;
    };
    const bool paren = is_op("(");
    if (paren) ++at_;
    auto first = one();
    if (!is_op(",")) {
      if (paren) expect_op(")");
      return first;
    }
    auto tuple = make(Expr::Kind::Tuple, pos);
    tuple->items.push_back(std::move(first));
    while (is_op(",")) {
      ++at_;
      tuple->items.push_back(one());
    }
    if (paren) expect_op(")");
    return tuple;
  }

  std::vector<Arg> parse_params() {
    std::vector<Arg> params;
    expect_op("(");
    while (!is_op(")")) {
      Arg a;
      a.name = expect_name();
      if (is_op("=")) {
        ++at_;
        a.value = parse_expression();
      }
      params.push_back(std::move(a));
      if (!is_op(",")) break;
      ++at_;
    }
    expect_op(")");
    return params;
  }

  // ---- expressions, lowest precedence first (as Jinja's parser)
  ExprPtr parse_tuple_or_expression() {
    auto first = parse_expression();
    if (!is_op(",")) return first;
    auto tuple = make(Expr::Kind::Tuple, first->pos);
    tuple->items.push_back(std::move(first));
    while (is_op(",")) {
      ++at_;
      tuple->items.push_back(parse_expression());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    Deeper guard(*this);
    auto value = parse_or();
    if (!is_name("if")) return value;
    auto t = make(Expr::Kind::Ternary, peek().pos);
    ++at_;
    t->items.push_back(std::move(value));
    t->items.push_back(parse_or());
    if (is_name("else")) {
      ++at_;
      t->items.push_back(parse_expression());
    } else {
      t->items.push_back(nullptr);
    }
    return t;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right) {
    auto b = make(Expr::Kind::Binary, left->pos);
    b->name = std::move(op);
    b->left = std::move(left);
    b->right = std::move(right);
    return b;
  }

  ExprPtr parse_or() {
    auto left = parse_and();
    while (is_name("or")) {
      ++at_;
      left = binary("or", std::move(left), parse_and());
    }
    return left;
  }
  ExprPtr parse_and() {
    auto left = parse_not();
    while (is_name("and")) {
      ++at_;
      left = binary("and", std::move(left), parse_not());
    }
    return left;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      Deeper guard(*this);
      auto u = make(Expr::Kind::Unary, next().pos);
      u->name = "not";
      u->object = parse_not();
      return u;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    auto left = parse_additive();
    while (true) {
      std::string op;
      if (peek().type == T::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                   peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        ++at_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        at_ += 2;
        op = "not in";
      } else {
        return left;
      }
      left = binary(op, std::move(left), parse_additive());
    }
  }
  ExprPtr parse_additive() {
    auto left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }
  ExprPtr parse_concat() {
    auto left = parse_multiplicative();
    while (is_op("~")) {
      ++at_;
      left = binary("~", std::move(left), parse_multiplicative());
    }
    return left;
  }
  ExprPtr parse_multiplicative() {
    auto left = parse_power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = binary(op, std::move(left), parse_power());
    }
    return left;
  }
  ExprPtr parse_power() {
    auto left = parse_unary(true);
    while (is_op("**")) {
      ++at_;
      left = binary("**", std::move(left), parse_unary(true));
    }
    return left;
  }
  ExprPtr parse_unary(bool with_filters) {
    Deeper guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = make(Expr::Kind::Unary, peek().pos);
      e->name = next().text;
      e->object = parse_unary(false);
    } else {
      e = parse_postfix(parse_primary());
    }
    if (with_filters) return parse_filters_and_tests(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    if (t.type == T::String) {
      auto e = make(Expr::Kind::Literal, t.pos);
      std::string s;
      while (peek().type == T::String) s += next().text;  // adjacent literals join
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t.type == T::Int || t.type == T::Float) {
      auto e = make(Expr::Kind::Literal, t.pos);
      try {
        e->value = t.type == T::Int ? Value::integer(std::stoll(t.text)) : Value::number(std::stod(t.text));
      } catch (const std::exception&) {
        syntax_error(t.pos, fmt::format("number '{}' is out of range", t.text));
      }
      ++at_;
      return e;
    }
    if (t.type == T::Name) {
      auto e = make(Expr::Kind::Name, t.pos);
      e->name = next().text;
      if (e->name == "true" || e->name == "True") return literal(e->pos, Value::boolean(true));
      if (e->name == "false" || e->name == "False") return literal(e->pos, Value::boolean(false));
      if (e->name == "none" || e->name == "None") return literal(e->pos, Value::none());
      return e;
    }
    if (is_op("(")) {
      const Pos pos = next().pos;
      if (is_op(")")) {
        ++at_;
        return make(Expr::Kind::Tuple, pos);
      }
      auto first = parse_expression();
      if (is_op(")")) {
        ++at_;
        return first;
      }
      auto tuple = make(Expr::Kind::Tuple, pos);
      tuple->items.push_back(std::move(first));
      while (is_op(",")) {
        ++at_;
        if (is_op(")")) break;
        tuple->items.push_back(parse_expression());
      }
      expect_op(")");
      return tuple;
    }
    if (is_op("[")) {
      auto list = make(Expr::Kind::List, next().pos);
      while (!is_op("]")) {
        list->items.push_back(parse_expression());
        if (!is_op(",")) break;
        ++at_;
      }
      expect_op("]");
      return list;
    }
    if (is_op("{")) {
      auto dict = make(Expr::Kind::Dict, next().pos);
      while (!is_op("}")) {
        dict->items.push_back(parse_expression());
        expect_op(":");
        dict->items.push_back(parse_expression());
        if (!is_op(",")) break;
        ++at_;
      }
      expect_op("}");
      return dict;
    }
    syntax_error(t.pos, "expected an expression, found " + describe(t));
  }

  static ExprPtr literal(Pos pos, Value v) {
    auto e = make(Expr::Kind::Literal, pos);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const Pos pos = next().pos;
        auto a = make(Expr::Kind::Attribute, pos);
        if (peek().type == T::Int) {  // x.0 is x[0]
          a->kind = Expr::Kind::Subscript;
          a->items.push_back(parse_primary());  // an integer literal
        } else {
          a->name = expect_name();
        }
        a->object = std::move(e);
        e = std::move(a);
      } else if (is_op("[")) {
        const Pos pos = next().pos;
        ExprPtr parts[3];
        int n_colons = 0;
        while (true) {
          if (is_op(":")) {
            ++at_;
            if (++n_colons > 2) syntax_error(peek().pos, "a slice has at most two ':'");
            continue;
          }
          if (is_op("]")) break;
          if (parts[n_colons]) syntax_error(peek().pos, "expected ':' or ']' in subscript, found " + describe(peek()));
          parts[n_colons] = parse_expression();
        }
        expect_op("]");
        auto s = make(n_colons ? Expr::Kind::Slice : Expr::Kind::Subscript, pos);
        if (!n_colons && !parts[0]) syntax_error(pos, "empty subscript '[]'");
        for (auto& p : parts) s->items.push_back(std::move(p));
        if (!n_colons) s->items.resize(1);
        s->object = std::move(e);
        e = std::move(s);
      } else if (is_op("(")) {
        auto c = make(Expr::Kind::Call, e->pos);
        c->args = parse_call_args();
        c->object = std::move(e);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  std::vector<Arg> parse_call_args() {
    expect_op("(");
    std::vector<Arg> args;
    while (!is_op(")")) {
      Arg a;
      if (is_op("*") || is_op("**")) syntax_error(peek().pos, "argument unpacking with '*' is not supported");
      if (peek().type == T::Name && is_op("=", 1)) {
        a.name = next().text;
        ++at_;
      }
      a.value = parse_expression();
      args.push_back(std::move(a));
      if (!is_op(",")) break;
      ++at_;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_filter(ExprPtr object) {
    auto f = make(Expr::Kind::Filter, peek().pos);
    f->name = expect_name();
    while (is_op(".")) {  // dotted filter names are not a thing in the subset; refuse clearly
      syntax_error(peek().pos, "dotted filter names are not supported");
    }
    if (is_op("(")) f->args = parse_call_args();
    f->object = std::move(object);
    return f;
  }

  ExprPtr parse_filters_and_tests(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        ++at_;
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        auto t = make(Expr::Kind::Test, next().pos);
        if (is_name("not")) {
          ++at_;
          t->negate = true;
        }
        t->name = expect_name();
        if (is_op("(")) {
          t->args = parse_call_args();
        } else if ((peek().type == T::Name || peek().type == T::String || peek().type == T::Int ||
                    peek().type == T::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") && !is_name("in") &&
                   !is_name("not") && !is_name("is")) {
          Arg a;
          a.value = parse_postfix(parse_primary());
          t->args.push_back(std::move(a));
        }
        t->object = std::move(e);
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> toks_;
  size_t at_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(std::string_view source) { return Parser(tokenize(source)).run(); }

}  // namespace loom::jinja
