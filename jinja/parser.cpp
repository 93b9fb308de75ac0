#include "jinja/parser.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "jinja/builtins.h"

namespace sb::jinja {

namespace {

// Expressions and blocks nested deeper than this are refused: the parser
// and the interpreter recurse once per level, and a template's nesting must
// never reach the end of a thread's stack.
constexpr int kMaxNesting = 200;

bool is_builtin_function(const std::string& n) {
  return n == "raise_exception" || n == "namespace" || n == "range" || n == "dict";
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  Body run() {
    Body body = statements({});
    if (cur().type != Tok::kEof) throw TemplateError(cur().pos, "unexpected tag");
    for (const auto& [name, pos] : called_)
      if (!is_builtin_function(name) && !macros_.count(name))
        throw TemplateError(pos, "call of '" + name + "', which is neither a macro of this template nor a supported "
                                 "function (raise_exception, namespace, range, dict)");
    return body;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const { throw TemplateError(cur().pos, what); }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "'" + found());
  }
  std::string expect_name() {
    if (cur().type != Tok::kName) fail("expected a name" + found());
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::kBlockEnd) fail("expected the end of the tag" + found());
    next();
  }
  std::string found() const {
    switch (cur().type) {
      case Tok::kEof: return ", found the end of the template";
      case Tok::kBlockEnd: return ", found %}";
      case Tok::kVarEnd: return ", found }}";
      default: return ", found '" + cur().text + "'";
    }
  }

  // Statements until a block tag whose keyword is one of `ends` (left unconsumed,
  // positioned at that keyword), or the end of the template.
  Body statements(const std::set<std::string>& ends) {
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::kEof) {
        for (const std::string& e : ends)
          if (e.rfind("end", 0) == 0) fail("missing {% " + e + " %}");
        return body;
      }
      if (t.type == Tok::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->pos = t.pos;
        s->expr = tuple_expr(true);
        if (cur().type != Tok::kVarEnd) fail("expected }}" + found());
        next();
        body.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        if (peek().type == Tok::kName && ends.count(peek().text)) {
          next();
          return body;
        }
        next();
        body.push_back(statement());
      } else {
        fail("unexpected token");
      }
    }
  }

  // An integer literal; one beyond 64 bits is an error (jinja2's integers
  // are unbounded, statebank's are 64-bit: jinja/template.h).
  static int64_t int_literal(const Token& t) {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size())
      throw TemplateError(t.pos, "the integer " + t.text.substr(0, 32) + " does not fit in 64 bits");
    return v;
  }

  // One level of nesting for as long as it lives.
  struct Nested {
    Nested(Parser* p, Pos pos) : p_(p) {
      if (++p_->nesting_ > kMaxNesting)
        throw TemplateError(pos, "nested deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~Nested() { --p_->nesting_; }
    Parser* p_;
  };

  StmtPtr statement() {
    Pos pos = cur().pos;
    Nested nested(this, pos);
    if (cur().type != Tok::kName) fail("expected a statement" + found());
    std::string kw = cur().text;
    next();
    auto s = std::make_unique<Stmt>();
    s->pos = pos;
    if (kw == "if") {
      if_statement(*s);
    } else if (kw == "for") {
      for_statement(*s);
    } else if (kw == "set") {
      set_statement(*s);
    } else if (kw == "macro") {
      macro_statement(*s);
    } else if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      expect_block_end();
    } else if (kw == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      s->expr = filters(nullptr);
      s->body = block_body("endfilter");
    } else if (kw == "with") {
      with_statement(*s);
    } else if (kw == "generation") {
      s->kind = Stmt::Kind::kPassThrough;
      s->body = block_body("endgeneration");
    } else {
      throw TemplateError(pos, "the statement {% " + kw + " %} is not supported");
    }
    return s;
  }

  // The rest of an opening tag, the body, and the closing tag `end`.
  Body block_body(const char* end) {
    expect_block_end();
    Body body = statements({end});
    expect_name();
    expect_block_end();
    return body;
  }

  void if_statement(Stmt& s) {
    s.kind = Stmt::Kind::kIf;
    ExprPtr cond = tuple_expr(true);
    expect_block_end();
    for (;;) {
      Body b = statements({"elif", "else", "endif"});
      s.branches.emplace_back(std::move(cond), std::move(b));
      std::string end = expect_name();
      if (end == "endif") break;
      if (end == "elif") {
        cond = tuple_expr(true);
      } else {
        cond = nullptr;
        expect_block_end();
        Body e = statements({"endif"});
        s.branches.emplace_back(nullptr, std::move(e));
        expect_name();
        break;
      }
      expect_block_end();
    }
    expect_block_end();
  }

  void for_statement(Stmt& s) {
    s.kind = Stmt::Kind::kFor;
    s.targets = assign_targets("in");
    if (!skip_name("in")) fail("expected 'in'" + found());
    s.expr = tuple_expr(false);
    if (skip_name("if")) s.cond = expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    s.body = statements({"else", "endfor"});
    if (expect_name() == "else") {
      expect_block_end();
      s.else_body = statements({"endfor"});
      expect_name();
    }
    expect_block_end();
  }

  // {% set a.b = x %}, {% set a, b = x %} or the block form {% set a %}...{% endset %}.
  void set_statement(Stmt& s) {
    std::string first = expect_name();
    s.targets = {first};
    if (skip_op(".")) {
      s.kind = Stmt::Kind::kSet;
      s.attr = expect_name();
      expect_op("=");
      s.expr = tuple_expr(true);
      expect_block_end();
      return;
    }
    while (skip_op(",")) s.targets.push_back(expect_name());
    if (skip_op("=")) {
      s.kind = Stmt::Kind::kSet;
      s.expr = tuple_expr(true);
      expect_block_end();
      return;
    }
    if (s.targets.size() != 1) fail("a block set takes one name");
    if (is_op("|")) fail("filters on a block set are not supported");
    s.kind = Stmt::Kind::kSetBlock;
    s.body = block_body("endset");
  }

  void macro_statement(Stmt& s) {
    s.kind = Stmt::Kind::kMacro;
    auto m = std::make_unique<MacroNode>();
    m->pos = s.pos;
    m->name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      m->params.push_back(expect_name());
      m->defaults.push_back(skip_op("=") ? expression(true) : nullptr);
      if (!skip_op(",")) break;
    }
    expect_op(")");
    macros_.insert(m->name);
    m->body = block_body("endmacro");
    s.macro = std::move(m);
  }

  void with_statement(Stmt& s) {
    s.kind = Stmt::Kind::kWith;
    while (cur().type != Tok::kBlockEnd) {
      s.targets.push_back(expect_name());
      expect_op("=");
      s.values.push_back(expression(true));
      if (!skip_op(",")) break;
    }
    s.body = block_body("endwith");
  }

  std::vector<std::string> assign_targets(const char* end) {
    std::vector<std::string> out;
    bool paren = skip_op("(");
    out.push_back(expect_name());
    while (skip_op(",")) {
      if (paren && is_op(")")) break;
      out.push_back(expect_name());
    }
    if (paren) expect_op(")");
    (void)end;
    return out;
  }

  // Makes `e` one level taller than `child`, refusing a tree taller than
  // kMaxNesting: evaluating and freeing a tree recurse once per level, and a
  // left-leaning chain (`1 + 1 + ...`, `a.b.c...`) is built by a loop, not by
  // the parser's recursion that Nested bounds.
  static void grow(Expr& e, const Expr* child) {
    if (!child) return;
    e.height = std::max(e.height, child->height + 1);
    if (e.height > kMaxNesting)
      throw TemplateError(e.pos, "expression nested deeper than " + std::to_string(kMaxNesting) + " levels");
  }
  static void adopt(Expr& e, ExprPtr child) {
    grow(e, child.get());
    e.args.push_back(std::move(child));
  }

  ExprPtr node(Expr::Kind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  // An expression, or an implicit tuple "a, b".
  ExprPtr tuple_expr(bool with_cond) {
    Pos p = cur().pos;
    ExprPtr first = expression(with_cond);
    if (!is_op(",")) return first;
    auto t = node(Expr::Kind::kTuple, p);
    adopt(*t, std::move(first));
    while (skip_op(",")) {
      if (cur().type == Tok::kBlockEnd || cur().type == Tok::kVarEnd || is_op(")")) break;
      adopt(*t, expression(with_cond));
    }
    return t;
  }

  ExprPtr expression(bool with_cond) { return with_cond ? cond_expr() : or_expr(); }

  ExprPtr cond_expr() {
    ExprPtr e = or_expr();
    while (is_name("if")) {
      Pos p = cur().pos;
      Nested nested(this, p);
      next();
      auto c = node(Expr::Kind::kCond, p);
      ExprPtr test = or_expr();
      ExprPtr other = skip_name("else") ? cond_expr() : nullptr;
      adopt(*c, std::move(e));
      adopt(*c, std::move(test));
      adopt(*c, std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(Expr::Kind k, ExprPtr a, ExprPtr b, Pos p, std::string name = {}) {
    auto e = node(k, p);
    e->name = std::move(name);
    adopt(*e, std::move(a));
    adopt(*e, std::move(b));
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      Pos p = cur().pos;
      next();
      e = binary(Expr::Kind::kOr, std::move(e), and_expr(), p);
    }
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      Pos p = cur().pos;
      next();
      e = binary(Expr::Kind::kAnd, std::move(e), not_expr(), p);
    }
    return e;
  }

  ExprPtr not_expr() {
    if (is_name("not")) {
      Pos p = cur().pos;
      Nested nested(this, p);
      next();
      auto e = node(Expr::Kind::kNot, p);
      adopt(*e, not_expr());
      return e;
    }
    return compare();
  }

  ExprPtr compare() {
    Pos p = cur().pos;
    ExprPtr first = math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    for (;;) {
      std::string op;
      if (cur().type == Tok::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                     cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      ops.push_back(op);
      operands.push_back(math1());
    }
    if (ops.empty()) return first;
    auto e = node(Expr::Kind::kCompare, p);
    adopt(*e, std::move(first));
    for (auto& o : operands) adopt(*e, std::move(o));
    e->ops = std::move(ops);
    return e;
  }

  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      Pos p = cur().pos;
      std::string op = cur().text;
      next();
      e = binary(Expr::Kind::kBinary, std::move(e), concat(), p, op);
    }
    return e;
  }

  ExprPtr concat() {
    Pos p = cur().pos;
    ExprPtr first = math2();
    if (!is_op("~")) return first;
    auto e = node(Expr::Kind::kConcat, p);
    adopt(*e, std::move(first));
    while (skip_op("~")) adopt(*e, math2());
    return e;
  }

  ExprPtr math2() {
    ExprPtr e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Pos p = cur().pos;
      std::string op = cur().text;
      next();
      e = binary(Expr::Kind::kBinary, std::move(e), power(), p, op);
    }
    return e;
  }

  ExprPtr power() {
    ExprPtr e = unary(true);
    while (is_op("**")) {
      Pos p = cur().pos;
      next();
      e = binary(Expr::Kind::kBinary, std::move(e), unary(true), p, "**");
    }
    return e;
  }

  ExprPtr unary(bool with_filter) {
    Pos p = cur().pos;
    Nested nested(this, p);
    ExprPtr e;
    if (skip_op("-")) {
      e = node(Expr::Kind::kNeg, p);
      adopt(*e, unary(false));
    } else if (skip_op("+")) {
      e = node(Expr::Kind::kPos, p);
      adopt(*e, unary(false));
    } else {
      e = postfix(primary());
    }
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = cur();
    Pos p = t.pos;
    if (t.type == Tok::kName) {
      std::string n = t.text;
      next();
      auto e = node(Expr::Kind::kLiteral, p);
      if (n == "true" || n == "True") e->literal = true;
      else if (n == "false" || n == "False") e->literal = false;
      else if (n == "none" || n == "None") e->literal = nullptr;
      else {
        e->kind = Expr::Kind::kName;
        e->name = n;
      }
      return e;
    }
    if (t.type == Tok::kString) {
      std::string s;
      while (cur().type == Tok::kString) {
        s += cur().text;
        next();
      }
      auto e = node(Expr::Kind::kLiteral, p);
      e->literal = s;
      return e;
    }
    if (t.type == Tok::kInt || t.type == Tok::kFloat) {
      auto e = node(Expr::Kind::kLiteral, p);
      try {
        if (t.type == Tok::kInt) e->literal = int_literal(t);
        else e->literal = std::strtod(t.text.c_str(), nullptr);  // beyond a double: inf, as Python
      } catch (const std::exception&) {
        fail("number out of range: " + t.text);
      }
      next();
      return e;
    }
    if (skip_op("(")) {
      if (skip_op(")")) {
        auto e = node(Expr::Kind::kTuple, p);
        return e;
      }
      ExprPtr first = expression(true);
      if (skip_op(")")) return first;
      auto e = node(Expr::Kind::kTuple, p);
      adopt(*e, std::move(first));
      while (skip_op(",")) {
        if (is_op(")")) break;
        adopt(*e, expression(true));
      }
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = node(Expr::Kind::kList, p);
      while (!is_op("]")) {
        adopt(*e, expression(true));
        if (!skip_op(",")) break;
      }
      expect_op("]");
      return e;
    }
    if (skip_op("{")) {
      auto e = node(Expr::Kind::kDict, p);
      while (!is_op("}")) {
        adopt(*e, expression(true));
        expect_op(":");
        adopt(*e, expression(true));
        if (!skip_op(",")) break;
      }
      expect_op("}");
      return e;
    }
    fail("expected an expression" + found());
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      Pos p = cur().pos;
      if (skip_op(".")) {
        if (cur().type == Tok::kInt) {
          auto g = node(Expr::Kind::kItem, p);
          auto idx = node(Expr::Kind::kLiteral, cur().pos);
          idx->literal = int_literal(cur());
          next();
          adopt(*g, std::move(e));
          adopt(*g, std::move(idx));
          e = std::move(g);
        } else {
          auto g = node(Expr::Kind::kAttr, p);
          g->name = expect_name();
          adopt(*g, std::move(e));
          e = std::move(g);
        }
      } else if (skip_op("[")) {
        e = subscript(std::move(e), p);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr obj, Pos p) {
    ExprPtr parts[3];
    bool is_slice = false;
    if (!is_op(":")) parts[0] = expression(true);
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) parts[1] = expression(true);
      if (skip_op(":") && !is_op("]")) parts[2] = expression(true);
    }
    if (is_op(",")) fail("tuple subscripts are not supported");
    expect_op("]");
    auto e = node(is_slice ? Expr::Kind::kSlice : Expr::Kind::kItem, p);
    adopt(*e, std::move(obj));
    if (is_slice) {
      for (auto& part : parts) adopt(*e, std::move(part));
    } else {
      adopt(*e, std::move(parts[0]));
    }
    return e;
  }

  void call_args(Expr* e) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        ExprPtr value = expression(true);
        grow(*e, value.get());
        e->kwargs.emplace_back(key, std::move(value));
      } else {
        if (!e->kwargs.empty()) fail("a positional argument follows a keyword argument");
        adopt(*e, expression(true));
      }
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr call(ExprPtr callee) {
    Pos p = callee->pos;
    if (callee->kind == Expr::Kind::kName) {
      called_.emplace_back(callee->name, callee->pos);
    } else if (callee->kind == Expr::Kind::kAttr) {
      if (!is_method(callee->name) && callee->name != "cycle")
        throw TemplateError(callee->pos, "the method '" + callee->name + "' is not supported");
    } else {
      fail("only functions, macros and methods can be called");
    }
    auto e = node(Expr::Kind::kCall, p);
    adopt(*e, std::move(callee));
    call_args(e.get());
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().type == Tok::kName) {
      next();
      n += "." + expect_name();
    }
    return n;
  }

  // `| name(args)` chain applied to `operand` (null for a filter block).
  ExprPtr filters(ExprPtr operand) {
    bool first = operand == nullptr;
    do {
      Pos p = cur().pos;
      auto f = node(Expr::Kind::kFilter, p);
      f->name = dotted_name();
      if (!is_filter(f->name)) throw TemplateError(p, "the filter '" + f->name + "' is not supported");
      adopt(*f, std::move(operand));
      if (is_op("(")) call_args(f.get());
      operand = std::move(f);
      first = false;
    } while (skip_op("|"));
    (void)first;
    return operand;
  }

  ExprPtr filter_expr(ExprPtr e) {
    for (;;) {
      if (skip_op("|")) {
        e = filters(std::move(e));
      } else if (is_name("is")) {
        Pos p = cur().pos;
        next();
        auto t = node(Expr::Kind::kTest, p);
        t->negated = skip_name("not");
        t->name = dotted_name();
        if (!is_test(t->name)) throw TemplateError(p, "the test '" + t->name + "' is not supported");
        adopt(*t, std::move(e));
        if (is_op("(")) {
          call_args(t.get());
        } else if ((cur().type == Tok::kName || cur().type == Tok::kString || cur().type == Tok::kInt ||
                    cur().type == Tok::kFloat || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if")) {
          if (is_name("is")) fail("tests cannot be chained with 'is'");
          adopt(*t, postfix(primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int nesting_ = 0;
  std::set<std::string> macros_;
  std::vector<std::pair<std::string, Pos>> called_;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace sb::jinja
