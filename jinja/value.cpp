#include "jinja/value.h"

#include <cmath>

#include <utf8proc.h>

#include "jinja/json_text.h"

namespace sb::jinja {

Value Value::of(std::shared_ptr<Namespace> ns) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.ns_ = std::move(ns);
  return v;
}

Value Value::of(const MacroNode* macro) {
  Value v;
  v.kind_ = Kind::kMacro;
  v.macro_ = macro;
  return v;
}

Value Value::of(Builtin b) {
  Value v;
  v.kind_ = Kind::kBuiltin;
  v.builtin_ = b;
  return v;
}

Value Value::of(std::shared_ptr<LoopState> loop) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.loop_ = std::move(loop);
  return v;
}

namespace {

bool truthy_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return j.get<bool>();
    case Json::value_t::number_integer: return j.get<int64_t>() != 0;
    case Json::value_t::number_unsigned: return j.get<uint64_t>() != 0;
    case Json::value_t::number_float: return j.get<double>() != 0.0;
    case Json::value_t::string: return !j.get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object: return !j.empty();
    default: return false;
  }
}

std::string py_float_str(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return py_float_repr(d);
}

// Python's str.isprintable() for one code point: not Other or Separator,
// except the ASCII space.
bool printable(uint32_t cp) {
  if (cp == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return false;
    default:
      return true;
  }
}

void append_utf8(uint32_t cp, std::string* out) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t cp : code_points(s)) {
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!printable(cp)) {
      char buf[16];
      if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      else std::snprintf(buf, sizeof buf, "\\U%08x", cp);
      out += buf;
    } else {
      append_utf8(cp, &out);
    }
  }
  out.push_back(quote);
  return out;
}

bool as_double(const Json& j, double* d) {
  if (j.is_boolean()) {
    *d = j.get<bool>() ? 1 : 0;
    return true;
  }
  if (!j.is_number()) return false;
  *d = j.get<double>();
  return true;
}

}  // namespace

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kData: return truthy_json(v.json());
    default: return true;
  }
}

std::string py_repr(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return j.get<bool>() ? "True" : "False";
    case Json::value_t::number_integer: return std::to_string(j.get<int64_t>());
    case Json::value_t::number_unsigned: return std::to_string(j.get<uint64_t>());
    case Json::value_t::number_float: return py_float_str(j.get<double>());
    case Json::value_t::string: return repr_string(j.get_ref<const std::string&>());
    case Json::value_t::array: {
      std::string out = "[";
      bool first = true;
      for (const auto& e : j) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(e);
      }
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(it.key()) + ": " + py_repr(it.value());
      }
      return out + "}";
    }
    default: return "";
  }
}

std::string py_str(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  return py_repr(j);
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kData: return py_str(v.json());
    case Value::Kind::kNamespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, a] : v.ns()->attrs) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + (a.is_data() ? py_repr(a.json()) : py_str(a));
      }
      return out + "}>";
    }
    case Value::Kind::kMacro: return "<Macro>";
    case Value::Kind::kBuiltin: return "<function>";
    case Value::Kind::kLoop: return "<LoopContext>";
  }
  return "";
}

bool py_equal(const Json& a, const Json& b) {
  double x, y;
  if (as_double(a, &x) && as_double(b, &y)) {
    // Integers compare exactly (doubles lose precision past 2^53).
    if ((a.is_number_integer() || a.is_boolean()) && (b.is_number_integer() || b.is_boolean()) &&
        !a.is_number_unsigned() && !b.is_number_unsigned()) {
      auto iv = [](const Json& j) { return j.is_boolean() ? static_cast<int64_t>(j.get<bool>()) : j.get<int64_t>(); };
      return iv(a) == iv(b);
    }
    return x == y;
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!py_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !py_equal(it.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_data() && b.is_data()) return py_equal(a.json(), b.json());
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined: return true;
    case Value::Kind::kNamespace: return a.ns() == b.ns();
    case Value::Kind::kMacro: return a.macro() == b.macro();
    case Value::Kind::kBuiltin: return a.builtin() == b.builtin();
    case Value::Kind::kLoop: return a.loop() == b.loop();
    default: return false;
  }
}

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) {  // invalid byte: keep it as U+FFFD, as a repaired string would
      cp = 0xFFFD;
      n = 1;
    }
    out.push_back(static_cast<uint32_t>(cp));
    p += n;
    left -= n;
  }
  return out;
}

std::string from_code_points(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end && i < cps.size(); ++i) append_utf8(cps[i], &out);
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool py_isspace(uint32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
      (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
    return true;
  return false;
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<uint32_t> cps = code_points(s);
  std::vector<uint32_t> set;
  if (chars) set = code_points(*chars);
  auto strip_me = [&](uint32_t cp) {
    if (!chars) return py_isspace(cp);
    for (uint32_t c : set)
      if (c == cp) return true;
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_me(cps[b])) ++b;
  if (right)
    while (e > b && strip_me(cps[e - 1])) --e;
  if (b == 0 && e == cps.size()) return std::string(s);
  return from_code_points(cps, b, e);
}

}  // namespace sb::jinja
