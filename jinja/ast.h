// The syntax tree of a parsed template: expressions and statements, owned by
// Template and immutable after parsing (renders only read it, so one parsed
// template serves many threads).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/lexer.h"
#include "jinja/value.h"

namespace sb::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // args: items
    kTuple,    // args: items
    kDict,     // args: key, value, key, value...
    kAttr,     // args[0].name
    kItem,     // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]], each bound may be null
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // args[0] | name(args[1..], kwargs)
    kTest,     // args[0] is [not] name(args[1..])
    kNeg,      // -args[0]
    kPos,      // +args[0]
    kNot,      // not args[0]
    kAnd,      // args[0] and args[1]
    kOr,       // args[0] or args[1]
    kBinary,   // args[0] name args[1], name in + - * / // % **
    kConcat,   // args joined with ~
    kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ...
    kCond,     // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  Pos pos;
  Json literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  // Levels from this node down to its deepest leaf (1 for a leaf); the
  // parser keeps it within its nesting bound, so evaluating and freeing the
  // tree recurse a bounded number of times.
  int height = 1;
};

// A macro definition; Value::of(const MacroNode*) refers to it.
struct MacroNode {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null when it has none
  Body body;
  Pos pos;
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (a null condition is the else)
    kFor,          // for targets in expr [if cond]: body [else: else_body]
    kSet,          // set targets = expr, or set target_ns.attr = expr
    kSetBlock,     // {% set name %}body{% endset %}
    kMacro,        // macro
    kBreak,
    kContinue,
    kFilterBlock,  // {% filter expr %}body{% endfilter %}; expr is a kFilter with a null operand
    kWith,         // {% with targets = values %}body{% endwith %}
    kPassThrough,  // {% generation %}body{% endgeneration %} (Hugging Face): body as is
  };
  Kind kind;
  Pos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  std::string attr;  // kSet on a namespace: targets[0].attr
  std::vector<ExprPtr> values;  // kWith
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::unique_ptr<MacroNode> macro;
};

}  // namespace sb::jinja
