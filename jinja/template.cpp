#include "jinja/template.h"

#include <algorithm>
#include <unordered_map>

#include "jinja/ast.h"
#include "jinja/builtins.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace sb::jinja {

struct Program {
  Body body;
};

// The state behind a for statement's `loop`.
struct LoopState {
  std::vector<Value> items;
  size_t index = 0;
};

namespace {

constexpr size_t kMaxOutputBytes = 64u << 20;
constexpr int kMaxMacroDepth = 64;
constexpr int64_t kMaxRange = 1 << 20;

using Scope = std::unordered_map<std::string, Value>;

class Interpreter {
 public:
  explicit Interpreter(const Json& context) {
    for (auto it = context.begin(); it != context.end(); ++it) globals_[it.key()] = Value(it.value());
    globals_.try_emplace("raise_exception", Value::of(Builtin::kRaiseException));
    globals_.try_emplace("namespace", Value::of(Builtin::kNamespace));
    globals_.try_emplace("range", Value::of(Builtin::kRange));
    globals_.try_emplace("dict", Value::of(Builtin::kDict));
    scopes_.push_back(&globals_);
  }

  void run(const Body& body, std::string* out) {
    // jinja2 defines a template's top-level macros before it runs.
    for (const StmtPtr& s : body)
      if (s->kind == Stmt::Kind::kMacro) globals_[s->macro->name] = Value::of(s->macro.get());
    if (exec(body, out) != Flow::kNormal) throw TemplateError(Pos{}, "break or continue outside a loop");
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = (*it)->find(name);
      if (found != (*it)->end()) return found->second;
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  void check_size(const std::string& out, Pos pos) {
    if (out.size() > kMaxOutputBytes) throw TemplateError(pos, "the rendered text exceeds 64 MiB");
  }

  void assign(const std::vector<std::string>& targets, const Value& v, Pos pos) {
    Scope& scope = *scopes_.back();
    if (targets.size() == 1) {
      scope[targets[0]] = v;
      return;
    }
    std::vector<Value> items = iterate(v, pos);
    if (items.size() != targets.size())
      throw TemplateError(pos, "cannot unpack " + std::to_string(items.size()) + " values into " +
                                   std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) scope[targets[i]] = items[i];
  }

  Flow exec(const Body& body, std::string* out) {
    for (const StmtPtr& s : body) {
      Flow f = exec(*s, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& s, std::string* out) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        out->append(s.text);
        check_size(*out, s.pos);
        return Flow::kNormal;
      case Stmt::Kind::kOutput:
        out->append(py_str(eval(*s.expr)));
        check_size(*out, s.pos);
        return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches)
          if (!cond || truthy(eval(*cond))) return exec(body, out);
        return Flow::kNormal;
      case Stmt::Kind::kFor:
        return exec_for(s, out);
      case Stmt::Kind::kSet: {
        Value v = eval(*s.expr);
        if (!s.attr.empty()) {
          Value ns = lookup(s.targets[0]);
          if (ns.kind() != Value::Kind::kNamespace)
            throw TemplateError(s.pos, "cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
          ns.ns()->attrs[s.attr] = v;
        } else {
          assign(s.targets, v, s.pos);
        }
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        exec_scoped(s.body, &captured);
        (*scopes_.back())[s.targets[0]] = Value(Json(std::move(captured)));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        (*scopes_.back())[s.macro->name] = Value::of(s.macro.get());
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      case Stmt::Kind::kFilterBlock: {
        std::string captured;
        exec_scoped(s.body, &captured);
        out->append(py_str(filter_chain(*s.expr, Value(Json(std::move(captured))))));
        return Flow::kNormal;
      }
      case Stmt::Kind::kWith: {
        Scope scope;
        for (size_t i = 0; i < s.targets.size(); ++i) scope[s.targets[i]] = eval(*s.values[i]);
        scopes_.push_back(&scope);
        Flow f = exec(s.body, out);
        scopes_.pop_back();
        return f;
      }
      case Stmt::Kind::kPassThrough:
        return exec(s.body, out);
    }
    return Flow::kNormal;
  }

  void exec_scoped(const Body& body, std::string* out) {
    Scope scope;
    scopes_.push_back(&scope);
    Flow f = exec(body, out);
    scopes_.pop_back();
    if (f != Flow::kNormal) throw TemplateError(Pos{}, "break or continue outside a loop");
  }

  Flow exec_for(const Stmt& s, std::string* out) {
    std::vector<Value> items = iterate(eval(*s.expr), s.expr->pos);
    if (s.cond) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        Scope scope;
        scopes_.push_back(&scope);
        assign(s.targets, item, s.pos);
        bool keep = truthy(eval(*s.cond));
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body, out);
    auto loop = std::make_shared<LoopState>();
    loop->items = std::move(items);
    for (size_t i = 0; i < loop->items.size(); ++i) {
      loop->index = i;
      Scope scope;
      scopes_.push_back(&scope);
      assign(s.targets, loop->items[i], s.pos);
      scope["loop"] = Value::of(loop);
      Flow f = exec(s.body, out);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Value loop_attr(const LoopState& l, const std::string& name, Pos pos) {
    const int64_t i = static_cast<int64_t>(l.index), n = static_cast<int64_t>(l.items.size());
    if (name == "index") return Value(Json(i + 1));
    if (name == "index0") return Value(Json(i));
    if (name == "revindex") return Value(Json(n - i));
    if (name == "revindex0") return Value(Json(n - i - 1));
    if (name == "first") return Value(Json(i == 0));
    if (name == "last") return Value(Json(i == n - 1));
    if (name == "length") return Value(Json(n));
    if (name == "depth") return Value(Json(1));
    if (name == "depth0") return Value(Json(0));
    if (name == "previtem") return i > 0 ? l.items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item");
    if (name == "nextitem") return i + 1 < n ? l.items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item");
    (void)pos;
    return Value::undefined("'loop' has no attribute '" + name + "'");
  }

  void eval_args(const Expr& e, size_t first, std::vector<Value>* args, Kwargs* kwargs) {
    for (size_t i = first; i < e.args.size(); ++i) args->push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) kwargs->emplace_back(k, eval(*v));
  }

  // A kFilter chain whose innermost operand is null (a filter block).
  Value filter_chain(const Expr& e, const Value& input) {
    Value operand = e.args[0] ? filter_chain(*e.args[0], input) : input;
    std::vector<Value> args;
    Kwargs kwargs;
    eval_args(e, 1, &args, &kwargs);
    return apply_filter(e.name, operand, args, kwargs, e.pos);
  }

  Value call_macro(const MacroNode& m, const std::vector<Value>& args, const Kwargs& kwargs, Pos pos) {
    if (++macro_depth_ > kMaxMacroDepth) throw TemplateError(pos, "macros nest deeper than 64 calls");
    if (args.size() > m.params.size()) throw TemplateError(pos, "macro '" + m.name + "' takes " + std::to_string(m.params.size()) + " arguments");
    Scope local;
    std::vector<Scope*> saved = std::move(scopes_);
    scopes_ = {&globals_, &local};
    for (size_t i = 0; i < m.params.size(); ++i) {
      const Value* given = i < args.size() ? &args[i] : nullptr;
      for (const auto& [k, v] : kwargs)
        if (k == m.params[i]) given = &v;
      if (given) local[m.params[i]] = *given;
      else if (m.defaults[i]) local[m.params[i]] = eval(*m.defaults[i]);
      else local[m.params[i]] = Value::undefined("parameter '" + m.params[i] + "' was not provided");
    }
    for (const auto& [k, v] : kwargs)
      if (std::find(m.params.begin(), m.params.end(), k) == m.params.end())
        throw TemplateError(pos, "macro '" + m.name + "' takes no keyword argument '" + k + "'");
    std::string out;
    Flow f = exec(m.body, &out);
    scopes_ = std::move(saved);
    --macro_depth_;
    if (f != Flow::kNormal) throw TemplateError(pos, "break or continue outside a loop");
    return Value(Json(std::move(out)));
  }

  Value call_builtin(Builtin b, const std::vector<Value>& args, const Kwargs& kwargs, Pos pos) {
    switch (b) {
      case Builtin::kRaiseException:
        throw TemplateError(pos, args.empty() ? std::string("raise_exception") : py_str(args[0]));
      case Builtin::kNamespace:
      case Builtin::kDict: {
        if (!args.empty()) {
          if (args.size() > 1 || !args[0].is_mapping())
            throw TemplateError(pos, "namespace()/dict() take keyword arguments or one dict");
        }
        if (b == Builtin::kNamespace) {
          auto ns = std::make_shared<Namespace>();
          if (!args.empty())
            for (auto it = args[0].json().begin(); it != args[0].json().end(); ++it) ns->attrs[it.key()] = Value(it.value());
          for (const auto& [k, v] : kwargs) ns->attrs[k] = v;
          return Value::of(ns);
        }
        Json d = args.empty() ? Json::object() : args[0].json();
        for (const auto& [k, v] : kwargs) {
          if (!v.is_data()) throw TemplateError(pos, "dict() values must be data");
          d[k] = v.json();
        }
        return Value(std::move(d));
      }
      case Builtin::kRange: {
        if (!kwargs.empty() || args.empty() || args.size() > 3) throw TemplateError(pos, "range() takes 1 to 3 integers");
        std::vector<int64_t> a;
        for (const Value& v : args) {
          if (!v.is_data() || !(v.json().is_number_integer() || v.json().is_boolean()))
            throw TemplateError(pos, "range() takes integers");
          a.push_back(v.json().is_boolean() ? v.json().get<bool>() : v.json().get<int64_t>());
        }
        int64_t start = a.size() > 1 ? a[0] : 0, stop = a.size() > 1 ? a[1] : a[0], step = a.size() > 2 ? a[2] : 1;
        if (step == 0) throw TemplateError(pos, "range() arg 3 must not be zero");
        Json out = Json::array();
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
          if (static_cast<int64_t>(out.size()) >= kMaxRange) throw TemplateError(pos, "range() is too long");
          out.push_back(i);
        }
        return Value(std::move(out));
      }
    }
    throw TemplateError(pos, "unknown function");
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return Value(e.literal);
      case Expr::Kind::kName:
        return lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        std::vector<Value> items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return make_list(items, e.pos);
      }
      case Expr::Kind::kDict:
        return eval_dict(e);
      case Expr::Kind::kAttr: {
        Value obj = eval(*e.args[0]);
        if (obj.kind() == Value::Kind::kLoop) return loop_attr(*obj.loop(), e.name, e.pos);
        return get_item(obj, Value(Json(e.name)), e.pos);
      }
      case Expr::Kind::kItem: {
        Value obj = eval(*e.args[0]);
        Value key = eval(*e.args[1]);
        if (obj.kind() == Value::Kind::kLoop && key.is_string()) return loop_attr(*obj.loop(), key.str_ref(), e.pos);
        return get_item(obj, key, e.pos);
      }
      case Expr::Kind::kSlice: {
        Value obj = eval(*e.args[0]);
        auto bound = [&](size_t i) { return e.args[i] ? eval(*e.args[i]) : Value(); };
        return slice(obj, bound(1), bound(2), bound(3), e.pos);
      }
      case Expr::Kind::kCall:
        return eval_call(e);
      case Expr::Kind::kFilter:
      case Expr::Kind::kTest:
        return eval_filter_or_test(e);
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos:
        return eval_sign(e);
      case Expr::Kind::kNot:
        return Value(Json(!truthy(eval(*e.args[0]))));
      case Expr::Kind::kAnd: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? eval(*e.args[1]) : a;
      }
      case Expr::Kind::kOr: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? a : eval(*e.args[1]);
      }
      case Expr::Kind::kBinary:
        return binary_op(e.name, eval(*e.args[0]), eval(*e.args[1]), e.pos);
      case Expr::Kind::kConcat: {
        std::string s;
        for (const auto& a : e.args) s += py_str(eval(*a));
        return Value(Json(std::move(s)));
      }
      case Expr::Kind::kCompare:
        return eval_compare(e);
      case Expr::Kind::kCond:
        if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined("the condition was false and there is no else");
    }
    throw TemplateError(e.pos, "unknown expression");
  }

  Value eval_dict(const Expr& e) {
    Json d = Json::object();
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      Value k = eval(*e.args[i]), v = eval(*e.args[i + 1]);
      if (!k.is_string()) throw TemplateError(e.args[i]->pos, "dict keys must be strings here");
      if (!v.is_data()) throw TemplateError(e.args[i + 1]->pos, "a dict here cannot hold this value");
      d[k.str_ref()] = v.json();
    }
    return Value(std::move(d));
  }

  Value eval_filter_or_test(const Expr& e) {
    Value operand = eval(*e.args[0]);
    std::vector<Value> args;
    Kwargs kwargs;
    eval_args(e, 1, &args, &kwargs);
    if (e.kind == Expr::Kind::kFilter) return apply_filter(e.name, operand, args, kwargs, e.pos);
    bool r = apply_test(e.name, operand, args, e.pos);
    return Value(Json(e.negated ? !r : r));
  }

  // Unary - and +.
  Value eval_sign(const Expr& e) {
    Value v = eval(*e.args[0]);
    const bool neg = e.kind == Expr::Kind::kNeg;
    if (!v.is_number()) throw TemplateError(e.pos, "bad operand type for unary " + std::string(neg ? "-" : "+"));
    if (!neg) return v;
    return binary_op("-", Value(Json(0)), v, e.pos);
  }

  // A chain such as a < b <= c: true when every comparison holds, each operand evaluated once.
  Value eval_compare(const Expr& e) {
    Value left = eval(*e.args[0]);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.args[i + 1]);
      if (!compare_op(e.ops[i], left, right, e.pos)) return Value(Json(false));
      left = std::move(right);
    }
    return Value(Json(true));
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.args[0];
    std::vector<Value> args;
    Kwargs kwargs;
    if (callee.kind == Expr::Kind::kAttr) {
      Value obj = eval(*callee.args[0]);
      eval_args(e, 1, &args, &kwargs);
      if (obj.kind() == Value::Kind::kLoop && callee.name == "cycle") {
        if (args.empty()) throw TemplateError(e.pos, "loop.cycle() needs arguments");
        return args[obj.loop()->index % args.size()];
      }
      return call_method(obj, callee.name, args, kwargs, e.pos);
    }
    Value f = eval(callee);
    eval_args(e, 1, &args, &kwargs);
    if (f.kind() == Value::Kind::kMacro) return call_macro(*f.macro(), args, kwargs, e.pos);
    if (f.kind() == Value::Kind::kBuiltin) return call_builtin(f.builtin(), args, kwargs, e.pos);
    if (f.is_undefined()) throw TemplateError(e.pos, f.hint());
    throw TemplateError(e.pos, "'" + callee.name + "' is not callable");
  }

  Scope globals_;
  std::vector<Scope*> scopes_;
  int macro_depth_ = 0;
};

}  // namespace

Status Template::parse(std::string_view source, Template* out) {
  try {
    auto program = std::make_shared<Program>();
    program->body = jinja::parse(tokenize(source));
    out->program_ = std::move(program);
    return Status::ok();
  } catch (const TemplateError& e) {
    return Status::invalid(std::string("template ") + e.what());
  } catch (const std::exception& e) {  // a library's exception (a conversion, memory): an error, never a crash
    return Status::invalid(std::string("template: ") + e.what());
  }
}

Status Template::render(const nlohmann::ordered_json& context, std::string* out) const {
  if (!program_) return Status::invalid("no template");
  if (!context.is_object()) return Status::invalid("the template context must be a JSON object");
  try {
    std::string text;
    Interpreter(context).run(program_->body, &text);
    *out = std::move(text);
    return Status::ok();
  } catch (const TemplateError& e) {
    return Status::invalid(e.what());
  } catch (const std::exception& e) {  // as in parse()
    return Status::invalid(std::string("template: ") + e.what());
  }
}

}  // namespace sb::jinja
