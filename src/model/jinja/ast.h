// The syntax tree of a template: expressions (Expr) and statements (Node).
// Every node keeps the line and column it starts at, for error messages.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "value.h"

namespace loom::jinja {

struct Pos {
  int line = 1, column = 1;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::string name;  // empty for a positional argument
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    Literal,    // value
    Name,       // name
    List,       // items
    Tuple,      // items
    Dict,       // items: key, value, key, value, ...
    Attribute,  // object.name
    Subscript,  // object[index]
    Slice,      // object[a:b:c]: items = start, stop, step (null when absent)
    Call,       // object(args)
    Filter,     // object | name(args)
    Test,       // object is [not] name(args)
    Unary,      // op object ("not", "-", "+")
    Binary,     // left op right
    Ternary,    // items = then, condition, else (else may be null)
  };
  Kind kind;
  Pos pos;
  Value value;
  std::string name;  // name, attribute, filter, test or operator
  bool negate = false;
  ExprPtr object, left, right;
  std::vector<ExprPtr> items;
  std::vector<Arg> args;
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue };
  Kind kind;
  Pos pos;
  std::string text;                 // Text; Macro name
  ExprPtr expr;                     // Output, If test, For iterable, Set value/target owner, CallBlock call
  ExprPtr target;                   // For / Set target (Name, Tuple or Attribute)
  ExprPtr condition;                // For ... if condition
  std::vector<Arg> params;          // Macro and CallBlock parameters (value = default)
  ExprPtr filter;                   // FilterBlock: a Filter expression with no object
  bool recursive = false;           // For: "recursive", so that loop(items) renders the body again
  Body body, else_body;
};

}  // namespace loom::jinja
