#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include <utf8proc.h>

#include "jinja/json_text.h"

namespace sb::jinja {

namespace {

const std::set<std::string>& filter_names() {
  static const std::set<std::string> k = {
      "abs",  "capitalize", "count",  "d",      "default", "e",          "escape",     "first", "float",
      "indent", "int",      "items",  "join",   "last",    "length",     "list",       "lower", "map",
      "max",  "min",        "reject", "rejectattr", "replace", "reverse", "round",     "safe",  "select",
      "selectattr", "sort", "string", "sum",    "title",   "tojson",     "trim",       "unique", "upper",
      "wordcount"};
  return k;
}

const std::set<std::string>& test_names() {
  static const std::set<std::string> k = {
      "boolean", "callable", "defined", "divisibleby", "eq",  "equalto", "escaped", "even",     "false",
      "float",   "ge",       "gt",      "greaterthan", "in",  "integer", "iterable", "le",      "lessthan",
      "lower",   "lt",       "mapping", "ne",          "none", "number", "odd",     "sameas",   "sequence",
      "string",  "true",     "undefined", "upper"};
  return k;
}

const std::set<std::string>& method_names() {
  static const std::set<std::string> k = {
      // str
      "capitalize", "count", "endswith", "find", "join", "lower", "lstrip", "removeprefix", "removesuffix",
      "replace", "rfind", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "title", "upper",
      // dict
      "get", "items", "keys", "values"};
  return k;
}

[[noreturn]] void type_error(Pos pos, const std::string& what) { throw TemplateError(pos, what); }

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kMacro: return "Macro";
    case Value::Kind::kBuiltin: return "builtin_function";
    case Value::Kind::kLoop: return "LoopContext";
    case Value::Kind::kData: break;
  }
  switch (v.json().type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "int";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return "object";
  }
}

// Using an Undefined where a value is needed: jinja2's UndefinedError.
void require_defined(const Value& v, Pos pos) {
  if (v.is_undefined()) throw TemplateError(pos, v.hint().empty() ? "a value is undefined" : v.hint());
}

bool is_int(const Value& v) {
  return v.is_data() && (v.json().is_number_integer() || v.json().is_boolean());
}
bool is_float(const Value& v) { return v.is_data() && v.json().is_number_float(); }

int64_t to_int(const Value& v) {
  const Json& j = v.json();
  if (j.is_boolean()) return j.get<bool>() ? 1 : 0;
  if (j.is_number_unsigned()) return static_cast<int64_t>(j.get<uint64_t>());
  return j.get<int64_t>();
}
double to_double(const Value& v) {
  const Json& j = v.json();
  if (j.is_boolean()) return j.get<bool>() ? 1.0 : 0.0;
  return j.get<double>();
}

Value str_value(std::string s) { return Value(Json(std::move(s))); }
Value bool_value(bool b) { return Value(Json(b)); }
Value int_value(int64_t i) { return Value(Json(i)); }

const Value* arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t index, const char* name) {
  if (index < args.size()) return &args[index];
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

std::string string_arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t index, const char* name,
                       Pos pos, const std::string& fallback) {
  const Value* v = arg(args, kwargs, index, name);
  if (!v || v->is_none()) return fallback;
  if (!v->is_string()) type_error(pos, std::string("argument '") + name + "' must be a string, not " + type_name(*v));
  return v->str_ref();
}

int64_t int_arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t index, const char* name, Pos pos,
                int64_t fallback) {
  const Value* v = arg(args, kwargs, index, name);
  if (!v || v->is_none()) return fallback;
  if (!is_int(*v)) type_error(pos, std::string("argument '") + name + "' must be an integer, not " + type_name(*v));
  return to_int(*v);
}

bool bool_arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t index, const char* name, bool fallback) {
  const Value* v = arg(args, kwargs, index, name);
  return v ? truthy(*v) : fallback;
}

std::string map_code_points(const std::string& s, utf8proc_int32_t (*f)(utf8proc_int32_t)) {
  std::vector<uint32_t> cps = code_points(s);
  for (auto& c : cps) c = static_cast<uint32_t>(f(static_cast<utf8proc_int32_t>(c)));
  return from_code_points(cps, 0, cps.size());
}
std::string upper(const std::string& s) { return map_code_points(s, utf8proc_toupper); }
std::string lower(const std::string& s) { return map_code_points(s, utf8proc_tolower); }

bool is_cased(uint32_t cp) {
  auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

// Python's str.title().
std::string title(const std::string& s) {
  std::vector<uint32_t> cps = code_points(s);
  bool prev_cased = false;
  for (auto& c : cps) {
    auto cc = static_cast<utf8proc_int32_t>(c);
    bool cased = is_cased(c);
    c = static_cast<uint32_t>(prev_cased ? utf8proc_tolower(cc) : utf8proc_totitle(cc));
    prev_cased = cased;
  }
  return from_code_points(cps, 0, cps.size());
}

std::string capitalize(const std::string& s) {
  std::vector<uint32_t> cps = code_points(s);
  for (size_t i = 0; i < cps.size(); ++i) {
    auto cc = static_cast<utf8proc_int32_t>(cps[i]);
    cps[i] = static_cast<uint32_t>(i == 0 ? utf8proc_totitle(cc) : utf8proc_tolower(cc));
  }
  return from_code_points(cps, 0, cps.size());
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` around every character.
    std::vector<uint32_t> cps = code_points(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < cps.size()) out += from_code_points(cps, i, i + 1);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  for (;;) {
    size_t at = (count >= 0 && done >= count) ? std::string::npos : s.find(from, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos);
    out += to;
    pos = at + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// Python's str.split(sep, maxsplit) and rsplit.
std::vector<std::string> split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right,
                               Pos pos) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) type_error(pos, "empty separator");
    if (!from_right) {
      size_t start = 0;
      for (;;) {
        size_t at = (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) ? std::string::npos : s.find(*sep, start);
        if (at == std::string::npos) break;
        parts.push_back(s.substr(start, at - start));
        start = at + sep->size();
      }
      parts.push_back(s.substr(start));
    } else {
      size_t end = s.size();
      for (;;) {
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) break;
        if (end < sep->size()) break;
        size_t at = s.rfind(*sep, end - sep->size());
        if (at == std::string::npos) break;
        parts.push_back(s.substr(at + sep->size(), end - at - sep->size()));
        end = at;
      }
      parts.push_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
    return parts;
  }
  // Runs of whitespace; no empty strings.
  std::vector<uint32_t> cps = code_points(s);
  if (!from_right) {
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && py_isspace(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        size_t e = cps.size();
        while (e > i && py_isspace(cps[e - 1])) --e;
        parts.push_back(from_code_points(cps, i, e));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !py_isspace(cps[j])) ++j;
      parts.push_back(from_code_points(cps, i, j));
      i = j;
    }
  } else {
    size_t e = cps.size();
    while (e > 0) {
      while (e > 0 && py_isspace(cps[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        size_t b = 0;
        while (b < e && py_isspace(cps[b])) ++b;
        parts.push_back(from_code_points(cps, b, e));
        break;
      }
      size_t b = e;
      while (b > 0 && !py_isspace(cps[b - 1])) --b;
      parts.push_back(from_code_points(cps, b, e));
      e = b;
    }
    std::reverse(parts.begin(), parts.end());
  }
  return parts;
}

Value list_of_strings(const std::vector<std::string>& v) {
  Json a = Json::array();
  for (const auto& s : v) a.push_back(s);
  return Value(std::move(a));
}

// Python's ordering for sort/min/max/<.
int py_compare(const Value& a, const Value& b, Pos pos, bool case_insensitive = false) {
  if (a.is_number() && b.is_number()) {
    if (is_int(a) && is_int(b)) {
      int64_t x = to_int(a), y = to_int(b);
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    double x = to_double(a), y = to_double(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    if (case_insensitive) {
      std::string x = lower(a.str_ref()), y = lower(b.str_ref());
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int c = a.str_ref().compare(b.str_ref());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const Json &x = a.json(), &y = b.json();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      int c = py_compare(Value(x[i]), Value(y[i]), pos, case_insensitive);
      if (c != 0) return c;
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  type_error(pos, std::string("'<' is not supported between instances of '") + type_name(a) + "' and '" +
                      type_name(b) + "'");
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

Value attribute_of(const Value& item, const std::string& path, Pos pos) {
  Value v = item;
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    // A digit path too long for an integer is looked up as a string (it can
    // index no list).
    v = get_item(v, numeric && part.size() <= 18 ? int_value(std::stoll(part)) : str_value(part), pos);
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// select/reject/selectattr/rejectattr.
Value select(const Value& seq, const std::vector<Value>& args, bool by_attr, bool keep, Pos pos) {
  std::vector<Value> out;
  size_t at = 0;
  std::string attr;
  if (by_attr) {
    if (args.empty() || !args[0].is_string()) type_error(pos, "selectattr/rejectattr need an attribute name");
    attr = args[0].str_ref();
    at = 1;
  }
  std::string test;
  if (at < args.size()) {
    if (!args[at].is_string()) type_error(pos, "the test name must be a string");
    test = args[at].str_ref();
    if (!is_test(test)) type_error(pos, "the test '" + test + "' is not supported");
  }
  std::vector<Value> test_args(args.begin() + static_cast<std::ptrdiff_t>(std::min(args.size(), at + 1)), args.end());
  for (const Value& item : iterate(seq, pos)) {
    Value subject = by_attr ? attribute_of(item, attr, pos) : item;
    bool pass = test.empty() ? truthy(subject) : apply_test(test, subject, test_args, pos);
    if (pass == keep) out.push_back(item);
  }
  return make_list(out, pos);
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

bool is_filter(const std::string& name) { return filter_names().count(name) > 0; }
bool is_test(const std::string& name) { return test_names().count(name) > 0; }
bool is_method(const std::string& name) { return method_names().count(name) > 0; }

Value make_list(const std::vector<Value>& items, Pos pos) {
  Json a = Json::array();
  for (const Value& v : items) {
    if (!v.is_data())
      type_error(pos, std::string("a list or dict here cannot hold a value of type ") + type_name(v) +
                          (v.hint().empty() ? "" : " (" + v.hint() + ")"));
    a.push_back(v.json());
  }
  return Value(std::move(a));
}

std::vector<Value> iterate(const Value& v, Pos pos) {
  std::vector<Value> out;
  if (v.is_undefined()) return out;
  if (!v.is_data()) type_error(pos, std::string("'") + type_name(v) + "' object is not iterable");
  const Json& j = v.json();
  if (j.is_array()) {
    out.reserve(j.size());
    for (const auto& e : j) out.emplace_back(std::shared_ptr<const Json>(v.shared(), &e));
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) out.push_back(str_value(it.key()));
  } else if (j.is_string()) {
    std::vector<uint32_t> cps = code_points(j.get_ref<const std::string&>());
    for (size_t i = 0; i < cps.size(); ++i) out.push_back(str_value(from_code_points(cps, i, i + 1)));
  } else {
    type_error(pos, std::string("'") + type_name(v) + "' object is not iterable");
  }
  return out;
}

Value get_item(const Value& object, const Value& key, Pos pos) {
  require_defined(object, pos);
  std::string key_text = key.is_data() ? py_repr(key.json()) : "?";
  if (object.kind() == Value::Kind::kNamespace) {
    if (key.is_string()) {
      auto it = object.ns()->attrs.find(key.str_ref());
      if (it != object.ns()->attrs.end()) return it->second;
    }
    return Value::undefined("'Namespace' has no attribute " + key_text);
  }
  if (!object.is_data()) return Value::undefined(std::string("'") + type_name(object) + "' has no attribute " + key_text);
  const Json& j = object.json();
  if (j.is_object() && key.is_string()) {
    auto it = j.find(key.str_ref());
    if (it != j.end()) return Value(std::shared_ptr<const Json>(object.shared(), &*it));
    return Value::undefined("'dict object' has no attribute " + key_text);
  }
  if ((j.is_array() || j.is_string()) && is_int(key)) {
    int64_t i = to_int(key);
    if (j.is_array()) {
      int64_t n = static_cast<int64_t>(j.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("list index " + key_text + " out of range");
      return Value(std::shared_ptr<const Json>(object.shared(), &j[static_cast<size_t>(i)]));
    }
    std::vector<uint32_t> cps = code_points(j.get_ref<const std::string&>());
    int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("string index " + key_text + " out of range");
    return str_value(from_code_points(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
  }
  return Value::undefined(std::string("'") + type_name(object) + " object' has no attribute " + key_text);
}

Value slice(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v, Pos pos) {
  require_defined(object, pos);
  auto bound = [&](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!is_int(v)) type_error(pos, std::string("slice ") + what + " must be an integer");
    return to_int(v);
  };
  int64_t step = bound(step_v, "step").value_or(1);
  if (step == 0) type_error(pos, "slice step cannot be zero");
  bool is_str = object.is_string();
  if (!is_str && !object.is_list()) type_error(pos, std::string("'") + type_name(object) + "' object is not subscriptable");
  std::vector<uint32_t> cps;
  int64_t n;
  if (is_str) {
    cps = code_points(object.str_ref());
    n = static_cast<int64_t>(cps.size());
  } else {
    n = static_cast<int64_t>(object.json().size());
  }
  auto adjust = [&](std::optional<int64_t> v, bool is_start) {
    if (!v) return step < 0 ? (is_start ? n - 1 : -1) : (is_start ? 0 : n);
    int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  int64_t b = adjust(bound(start_v, "start"), true), e = adjust(bound(stop_v, "stop"), false);
  std::vector<int64_t> idx;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) idx.push_back(i);
  if (is_str) {
    std::vector<uint32_t> picked;
    for (int64_t i : idx) picked.push_back(cps[static_cast<size_t>(i)]);
    return str_value(from_code_points(picked, 0, picked.size()));
  }
  Json a = Json::array();
  for (int64_t i : idx) a.push_back(object.json()[static_cast<size_t>(i)]);
  return Value(std::move(a));
}

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b, Pos pos) {
  type_error(pos, "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

Value binary_op(const std::string& op, const Value& a, const Value& b, Pos pos) {
  require_defined(a, pos);
  require_defined(b, pos);
  if (!a.is_data() || !b.is_data()) unsupported_operands(op, a, b, pos);
  if (a.is_number() && b.is_number()) {
    bool ints = is_int(a) && is_int(b);
    if (ints && (op == "+" || op == "-" || op == "*")) {
      int64_t x = to_int(a), y = to_int(b), r;
      bool overflow = op == "+" ? __builtin_add_overflow(x, y, &r)
                      : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                  : __builtin_mul_overflow(x, y, &r);
      if (overflow) type_error(pos, "integer overflow in " + op);
      return int_value(r);
    }
    if (op == "+") return Value(Json(to_double(a) + to_double(b)));
    if (op == "-") return Value(Json(to_double(a) - to_double(b)));
    if (op == "*") return Value(Json(to_double(a) * to_double(b)));
    if (op == "/") {
      if (to_double(b) == 0) type_error(pos, "division by zero");
      return Value(Json(to_double(a) / to_double(b)));
    }
    if (op == "//" || op == "%") {
      if (to_double(b) == 0) type_error(pos, op == "%" ? "modulo by zero" : "integer division or modulo by zero");
      if (ints) {
        int64_t x = to_int(a), y = to_int(b);
        int64_t q = floor_div(x, y);
        return int_value(op == "//" ? q : x - q * y);
      }
      double x = to_double(a), y = to_double(b);
      double q = std::floor(x / y);
      if (op == "//") return Value(Json(q));
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(Json(m));
    }
    if (op == "**") {
      if (ints && to_int(b) >= 0) {
        int64_t base = to_int(a), e = to_int(b), r = 1;
        // |base| <= 1 never overflows: answered without a loop of e steps.
        if (base == 0 || base == 1) return int_value(e == 0 ? 1 : base);
        if (base == -1) return int_value(e % 2 ? -1 : 1);
        for (int64_t i = 0; i < e; ++i)  // overflows within 63 steps
          if (__builtin_mul_overflow(r, base, &r)) type_error(pos, "integer overflow in **");
        return int_value(r);
      }
      return Value(Json(std::pow(to_double(a), to_double(b))));
    }
    unsupported_operands(op, a, b, pos);
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) return str_value(a.str_ref() + b.str_ref());
    if (a.is_list() && b.is_list()) {
      Json r = a.json();
      for (const auto& e : b.json()) r.push_back(e);
      return Value(std::move(r));
    }
  }
  if (op == "*" && (is_int(a) || is_int(b)) && (a.is_string() || b.is_string() || a.is_list() || b.is_list())) {
    const Value& seq = is_int(a) ? b : a;
    int64_t n = std::max<int64_t>(0, to_int(is_int(a) ? a : b));
    if (n > (1 << 20)) type_error(pos, "sequence repetition too large");
    if (seq.is_string()) {
      std::string r;
      for (int64_t i = 0; i < n; ++i) r += seq.str_ref();
      return str_value(std::move(r));
    }
    Json r = Json::array();
    for (int64_t i = 0; i < n; ++i)
      for (const auto& e : seq.json()) r.push_back(e);
    return Value(std::move(r));
  }
  if (op == "%" && a.is_string()) type_error(pos, "printf-style string formatting (%) is not supported");
  unsupported_operands(op, a, b, pos);
}

bool compare_op(const std::string& op, const Value& a, const Value& b, Pos pos) {
  if (op == "==") return py_equal(a, b);
  if (op == "!=") return !py_equal(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_undefined()) {
      found = false;
    } else if (b.is_string()) {
      if (!a.is_string()) type_error(pos, std::string("'in <string>' requires string as left operand, not ") + type_name(a));
      found = b.str_ref().find(a.str_ref()) != std::string::npos;
    } else if (b.is_mapping()) {
      found = a.is_string() && b.json().contains(a.str_ref());
    } else if (b.is_list()) {
      for (const auto& e : b.json())
        if (a.is_data() && py_equal(a.json(), e)) {
          found = true;
          break;
        }
    } else if (b.kind() == Value::Kind::kNamespace) {
      found = a.is_string() && b.ns()->attrs.count(a.str_ref());
    } else {
      type_error(pos, std::string("argument of type '") + type_name(b) + "' is not iterable");
    }
    return op == "in" ? found : !found;
  }
  require_defined(a, pos);
  require_defined(b, pos);
  int c = py_compare(a, b, pos);
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  if (op == ">=") return c >= 0;
  type_error(pos, "unknown comparison " + op);
}

bool apply_test(const std::string& name, const Value& v, const std::vector<Value>& args, Pos pos) {
  auto need_arg = [&]() -> const Value& {
    if (args.empty()) type_error(pos, "the test '" + name + "' needs an argument");
    return args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_data() && v.json().is_boolean();
  if (name == "true") return v.is_data() && v.json().is_boolean() && v.json().get<bool>();
  if (name == "false") return v.is_data() && v.json().is_boolean() && !v.json().get<bool>();
  if (name == "integer") return v.is_data() && v.json().is_number_integer();
  if (name == "float") return is_float(v);
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_mapping();
  if (name == "iterable")
    return v.is_undefined() || (v.is_data() && (v.json().is_array() || v.json().is_object() || v.json().is_string()));
  if (name == "sequence")
    return v.is_undefined() || (v.is_data() && (v.json().is_array() || v.json().is_object() || v.json().is_string()));
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "sameas") {
    const Value& o = need_arg();
    if (v.is_data() && o.is_data()) {
      const Json &x = v.json(), &y = o.json();
      if ((x.is_null() && y.is_null()) || (x.is_boolean() && y.is_boolean() && x == y)) return true;
      return v.shared() == o.shared();
    }
    return py_equal(v, o) && !v.is_data();
  }
  if (name == "lower") return v.is_string() && lower(v.str_ref()) == v.str_ref();
  if (name == "upper") return v.is_string() && upper(v.str_ref()) == v.str_ref();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!is_int(v)) type_error(pos, "the test '" + name + "' needs an integer");
    int64_t x = to_int(v);
    if (name == "odd") return x % 2 != 0;
    if (name == "even") return x % 2 == 0;
    const Value& d = need_arg();
    if (!is_int(d) || to_int(d) == 0) type_error(pos, "divisibleby needs a non-zero integer");
    return x % to_int(d) == 0;
  }
  if (name == "in") return compare_op("in", v, need_arg(), pos);
  if (name == "eq" || name == "equalto") return compare_op("==", v, need_arg(), pos);
  if (name == "ne") return compare_op("!=", v, need_arg(), pos);
  if (name == "lt" || name == "lessthan") return compare_op("<", v, need_arg(), pos);
  if (name == "le") return compare_op("<=", v, need_arg(), pos);
  if (name == "gt" || name == "greaterthan") return compare_op(">", v, need_arg(), pos);
  if (name == "ge") return compare_op(">=", v, need_arg(), pos);
  type_error(pos, "the test '" + name + "' is not supported");
}

namespace {

// The filters, in groups: each returns nullopt for a name not its own.

// map(attribute=...) or map('filter', args...).
Value map_filter(const Value& v, const std::vector<Value>& args, const Kwargs& kwargs, Pos pos) {
  std::vector<Value> out;
  const Value* attr = arg(args, kwargs, 99, "attribute");
  if (attr) {
    if (!attr->is_string()) type_error(pos, "map(attribute=) needs a string");
    const Value* dflt = arg(args, kwargs, 99, "default");
    for (const Value& item : iterate(v, pos)) {
      Value x = attribute_of(item, attr->str_ref(), pos);
      out.push_back(x.is_undefined() && dflt ? *dflt : x);
    }
  } else {
    if (args.empty() || !args[0].is_string()) type_error(pos, "map needs a filter name or attribute=");
    std::string filter = args[0].str_ref();
    if (!is_filter(filter)) type_error(pos, "the filter '" + filter + "' is not supported");
    std::vector<Value> rest(args.begin() + 1, args.end());
    for (const Value& item : iterate(v, pos)) out.push_back(apply_filter(filter, item, rest, kwargs, pos));
  }
  return make_list(out, pos);
}

// sort, unique, min and max: orderings of the items, by an attribute or not.
Value order_filter(const std::string& name, const Value& v, const std::vector<Value>& args,
                   const Kwargs& kwargs, Pos pos) {
  bool ci = !bool_arg(args, kwargs, name == "sort" ? 1 : 0, "case_sensitive", false);
  const Value* attr = arg(args, kwargs, name == "sort" ? 2 : 1, "attribute");
  std::vector<Value> items = iterate(v, pos);
  auto key = [&](const Value& x) { return attr && attr->is_string() ? attribute_of(x, attr->str_ref(), pos) : x; };
  if (name == "unique") {
    std::vector<Value> out;
    for (const Value& x : items) {
      bool seen = false;
      for (const Value& y : out)
        if (ci && key(x).is_string() && key(y).is_string() ? lower(key(x).str_ref()) == lower(key(y).str_ref())
                                                            : py_equal(key(x), key(y)))
          seen = true;
      if (!seen) out.push_back(x);
    }
    return make_list(out, pos);
  }
  if (name == "sort") {
    bool rev = bool_arg(args, kwargs, 0, "reverse", false);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      int c = py_compare(key(x), key(y), pos, ci);
      return rev ? c > 0 : c < 0;
    });
    return make_list(items, pos);
  }
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    int c = py_compare(key(items[i]), key(items[best]), pos, ci);
    if (name == "min" ? c < 0 : c > 0) best = i;
  }
  return items[best];
}

// safe and default, and the filters on text (the operand read as a string) and tojson.
std::optional<Value> text_filter(const std::string& name, const Value& v, const std::vector<Value>& args,
                                 const Kwargs& kwargs, Pos pos) {
  if (name == "safe") return v;
  if (name == "default" || name == "d") {
    bool boolean = bool_arg(args, kwargs, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !truthy(v))) {
      const Value* d = arg(args, kwargs, 0, "default_value");
      return d ? *d : str_value("");
    }
    return v;
  }
  if (name == "string") return str_value(py_str(v));
  if (name == "trim") {
    const Value* c = arg(args, kwargs, 0, "chars");
    std::string chars;
    if (c && !c->is_none()) chars = string_arg(args, kwargs, 0, "chars", pos, "");
    return str_value(py_strip(py_str(v), c && !c->is_none() ? &chars : nullptr, true, true));
  }
  if (name == "upper") return str_value(upper(py_str(v)));
  if (name == "lower") return str_value(lower(py_str(v)));
  if (name == "capitalize") return str_value(capitalize(py_str(v)));
  if (name == "title") return str_value(title(py_str(v)));
  if (name == "escape" || name == "e") return str_value(html_escape(py_str(v)));
  if (name == "replace") {
    std::string from = string_arg(args, kwargs, 0, "old", pos, "");
    std::string to = string_arg(args, kwargs, 1, "new", pos, "");
    return str_value(replace(py_str(v), from, to, int_arg(args, kwargs, 2, "count", pos, -1)));
  }
  if (name == "tojson") {
    if (!v.is_data()) type_error(pos, std::string("Object of type ") + type_name(v) + " is not JSON serializable");
    for (const auto& [k, x] : kwargs)
      if (k != "indent" && k != "sort_keys" && !(k == "ensure_ascii" && !truthy(x)))
        type_error(pos, "tojson(" + k + "=...) is not supported");
    if (!args.empty()) type_error(pos, "tojson takes keyword arguments only here (indent=, sort_keys=)");
    int64_t indent = int_arg(args, kwargs, 99, "indent", pos, -1);
    return str_value(py_json_dumps(v.json(), static_cast<int>(indent), bool_arg(args, kwargs, 99, "sort_keys", false)));
  }
  if (name == "indent") {
    int64_t width = int_arg(args, kwargs, 0, "width", pos, 4);
    bool first = bool_arg(args, kwargs, 1, "first", false), blank = bool_arg(args, kwargs, 2, "blank", false);
    std::string pad(static_cast<size_t>(std::max<int64_t>(0, width)), ' ');
    std::string s = py_str(v), out;
    size_t start = 0;
    bool first_line = true;
    for (;;) {
      size_t nl = s.find('\n', start);
      std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      bool indent_it = (first_line ? first : true) && (blank || !py_strip(line, nullptr, true, true).empty());
      if (!first_line) out += "\n";
      out += (indent_it ? pad : "") + line;
      first_line = false;
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return str_value(std::move(out));
  }
  if (name == "wordcount") return int_value(static_cast<int64_t>(split(py_str(v), nullptr, -1, false, pos).size()));
  return std::nullopt;
}

// Filters over a sequence's items (or a mapping's, or a string's characters).
std::optional<Value> sequence_filter(const std::string& name, const Value& v, const std::vector<Value>& args,
                                     const Kwargs& kwargs, Pos pos) {
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return int_value(0);
    if (v.is_string()) return int_value(static_cast<int64_t>(code_point_count(v.str_ref())));
    if (v.is_list() || v.is_mapping()) return int_value(static_cast<int64_t>(v.json().size()));
    if (v.kind() == Value::Kind::kNamespace) return int_value(static_cast<int64_t>(v.ns()->attrs.size()));
    type_error(pos, std::string("object of type '") + type_name(v) + "' has no len()");
  }
  if (name == "items") {
    if (v.is_undefined()) return Value(Json::array());
    if (!v.is_mapping()) type_error(pos, "Can only get item pairs from a mapping.");
    Json a = Json::array();
    for (auto it = v.json().begin(); it != v.json().end(); ++it) a.push_back(Json::array({it.key(), it.value()}));
    return Value(std::move(a));
  }
  if (name == "list") return make_list(iterate(v, pos), pos);
  if (name == "first" || name == "last") {
    std::vector<Value> items = iterate(v, pos);
    if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<uint32_t> cps = code_points(v.str_ref());
      std::reverse(cps.begin(), cps.end());
      return str_value(from_code_points(cps, 0, cps.size()));
    }
    std::vector<Value> items = iterate(v, pos);
    std::reverse(items.begin(), items.end());
    return make_list(items, pos);
  }
  if (name == "join") {
    std::string sep = string_arg(args, kwargs, 0, "d", pos, "");
    const Value* attr = arg(args, kwargs, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v, pos)) {
      if (!first) out += sep;
      first = false;
      out += py_str(attr && attr->is_string() ? attribute_of(item, attr->str_ref(), pos) : item);
    }
    return str_value(std::move(out));
  }
  if (name == "map") return map_filter(v, args, kwargs, pos);
  if (name == "select") return select(v, args, false, true, pos);
  if (name == "reject") return select(v, args, false, false, pos);
  if (name == "selectattr") return select(v, args, true, true, pos);
  if (name == "rejectattr") return select(v, args, true, false, pos);
  if (name == "sort" || name == "unique" || name == "min" || name == "max") return order_filter(name, v, args, kwargs, pos);
  if (name == "sum") {
    const Value* attr = arg(args, kwargs, 0, "attribute");
    Value total = arg(args, kwargs, 1, "start") ? *arg(args, kwargs, 1, "start") : int_value(0);
    for (const Value& x : iterate(v, pos))
      total = binary_op("+", total, attr && attr->is_string() ? attribute_of(x, attr->str_ref(), pos) : x, pos);
    return total;
  }
  return std::nullopt;
}

// Numbers: conversions and rounding.
std::optional<Value> number_filter(const std::string& name, const Value& v, const std::vector<Value>& args,
                                   const Kwargs& kwargs, Pos pos) {
  if (name == "int") {
    int64_t dflt = int_arg(args, kwargs, 0, "default", pos, 0);
    if (is_int(v)) return int_value(to_int(v));
    if (is_float(v)) return int_value(static_cast<int64_t>(std::trunc(to_double(v))));
    if (v.is_string()) {
      std::string s = py_strip(v.str_ref(), nullptr, true, true);
      try {
        size_t used = 0;
        int64_t i = std::stoll(s, &used, static_cast<int>(int_arg(args, kwargs, 1, "base", pos, 10)));
        if (used == s.size()) return int_value(i);
        double d = std::stod(s, &used);
        if (used == s.size()) return int_value(static_cast<int64_t>(std::trunc(d)));
      } catch (const std::exception&) {
      }
    }
    return int_value(dflt);
  }
  if (name == "float") {
    if (v.is_number()) return Value(Json(to_double(v)));
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string s = py_strip(v.str_ref(), nullptr, true, true);
        double d = std::stod(s, &used);
        if (used == s.size()) return Value(Json(d));
      } catch (const std::exception&) {
      }
    }
    const Value* d = arg(args, kwargs, 0, "default");
    return d ? *d : Value(Json(0.0));
  }
  if (name == "abs") {
    if (!v.is_number()) type_error(pos, std::string("bad operand type for abs(): '") + type_name(v) + "'");
    if (is_int(v)) return int_value(to_int(v) < 0 ? -to_int(v) : to_int(v));
    return Value(Json(std::fabs(to_double(v))));
  }
  if (name == "round") {
    if (!v.is_number()) type_error(pos, "round needs a number");
    int64_t precision = int_arg(args, kwargs, 0, "precision", pos, 0);
    std::string method = string_arg(args, kwargs, 1, "method", pos, "common");
    double scale = std::pow(10.0, static_cast<double>(precision)), x = to_double(v) * scale;
    // Python's round(): halves to even.
    double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value(Json(r / scale));
  }
  return std::nullopt;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, const std::vector<Value>& args, const Kwargs& kwargs,
                   Pos pos) {
  if (std::optional<Value> r = text_filter(name, v, args, kwargs, pos)) return *std::move(r);
  if (std::optional<Value> r = sequence_filter(name, v, args, kwargs, pos)) return *std::move(r);
  if (std::optional<Value> r = number_filter(name, v, args, kwargs, pos)) return *std::move(r);
  type_error(pos, "the filter '" + name + "' is not supported");
}

namespace {

// The methods, by the object's type: each returns nullopt for a name not its own.

std::optional<Value> mapping_method(const Value& object, const std::string& name, const std::vector<Value>& args,
                                    Pos pos) {
  const Json& j = object.json();
  if (name == "items") return apply_filter("items", object, {}, {}, pos);
  if (name == "keys") {
    Json a = Json::array();
    for (auto it = j.begin(); it != j.end(); ++it) a.push_back(it.key());
    return Value(std::move(a));
  }
  if (name == "values") {
    Json a = Json::array();
    for (auto it = j.begin(); it != j.end(); ++it) a.push_back(it.value());
    return Value(std::move(a));
  }
  if (name == "get") {
    if (args.empty()) type_error(pos, "get expected at least 1 argument");
    Value got = args[0].is_string() ? get_item(object, args[0], pos) : Value::undefined();
    if (!got.is_undefined()) return got;
    return args.size() > 1 ? args[1] : Value(Json(nullptr));
  }
  return std::nullopt;
}

// startswith/endswith: does s start (prefix) or end with args[0] (a string
// or a tuple of strings)?
bool has_affix(const std::string& s, const std::string& name, const std::vector<Value>& args, Pos pos, bool prefix) {
  if (args.empty()) type_error(pos, name + " takes at least 1 argument");
  std::vector<std::string> candidates;
  if (args[0].is_string()) {
    candidates.push_back(args[0].str_ref());
  } else if (args[0].is_list()) {
    for (const auto& e : args[0].json()) {
      if (!e.is_string()) type_error(pos, name + " first arg must be str or a tuple of str");
      candidates.push_back(e.get<std::string>());
    }
  } else {
    type_error(pos, name + " first arg must be str or a tuple of str, not " + type_name(args[0]));
  }
  if (args.size() > 1) type_error(pos, name + " with start/end positions is not supported");
  for (const auto& c : candidates) {
    if (prefix ? s.compare(0, c.size(), c) == 0 && s.size() >= c.size()
               : s.size() >= c.size() && s.compare(s.size() - c.size(), c.size(), c) == 0)
      return true;
  }
  return false;
}

// find, rfind and count of a substring, in code points.
Value find_method(const std::string& s, const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                  Pos pos) {
  std::string needle = string_arg(args, kwargs, 0, "sub", pos, "");
  if (args.size() > 1) type_error(pos, name + " with start/end positions is not supported");
  if (name == "count") {
    if (needle.empty()) return int_value(static_cast<int64_t>(code_point_count(s)) + 1);
    int64_t n = 0;
    for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
    return int_value(n);
  }
  size_t at = name == "find" ? s.find(needle) : s.rfind(needle);
  if (at == std::string::npos) return int_value(-1);
  return int_value(static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, at))));
}

std::optional<Value> string_method(const std::string& s, const std::string& name, const std::vector<Value>& args,
                                   const Kwargs& kwargs, Pos pos) {
  if (name == "startswith") return bool_value(has_affix(s, name, args, pos, true));
  if (name == "endswith") return bool_value(has_affix(s, name, args, pos, false));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value* c = arg(args, kwargs, 0, "chars");
    std::string chars;
    bool has = c && !c->is_none();
    if (has) chars = string_arg(args, kwargs, 0, "chars", pos, "");
    return str_value(py_strip(s, has ? &chars : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const Value* sep = arg(args, kwargs, 0, "sep");
    std::string sep_text;
    bool has = sep && !sep->is_none();
    if (has) sep_text = string_arg(args, kwargs, 0, "sep", pos, "");
    return list_of_strings(split(s, has ? &sep_text : nullptr, int_arg(args, kwargs, 1, "maxsplit", pos, -1),
                                 name == "rsplit", pos));
  }
  if (name == "splitlines") {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < s.size()) {
      size_t nl = s.find('\n', start);
      if (nl == std::string::npos) nl = s.size();
      lines.push_back(s.substr(start, nl - start));
      start = nl + 1;
    }
    return list_of_strings(lines);
  }
  if (name == "upper") return str_value(upper(s));
  if (name == "lower") return str_value(lower(s));
  if (name == "title") return str_value(title(s));
  if (name == "capitalize") return str_value(capitalize(s));
  if (name == "replace")
    return str_value(replace(s, string_arg(args, kwargs, 0, "old", pos, ""), string_arg(args, kwargs, 1, "new", pos, ""),
                             int_arg(args, kwargs, 2, "count", pos, -1)));
  if (name == "find" || name == "rfind" || name == "count") return find_method(s, name, args, kwargs, pos);
  if (name == "join") {
    if (args.empty()) type_error(pos, "join takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(args[0], pos)) {
      if (!item.is_string()) type_error(pos, std::string("sequence item: expected str instance, ") + type_name(item) + " found");
      if (!first) out += s;
      first = false;
      out += item.str_ref();
    }
    return str_value(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    std::string a = string_arg(args, kwargs, 0, "prefix", pos, "");
    if (name == "removeprefix") return str_value(s.compare(0, a.size(), a) == 0 && s.size() >= a.size() ? s.substr(a.size()) : s);
    return str_value(s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0 ? s.substr(0, s.size() - a.size()) : s);
  }
  return std::nullopt;
}

}  // namespace

Value call_method(const Value& object, const std::string& name, const std::vector<Value>& args, const Kwargs& kwargs,
                  Pos pos) {
  require_defined(object, pos);
  if (object.is_mapping())
    if (std::optional<Value> r = mapping_method(object, name, args, pos)) return *std::move(r);
  if (object.is_string())
    if (std::optional<Value> r = string_method(object.str_ref(), name, args, kwargs, pos)) return *std::move(r);
  type_error(pos, std::string("'") + type_name(object) + "' object has no method '" + name + "'");
}

}  // namespace sb::jinja
