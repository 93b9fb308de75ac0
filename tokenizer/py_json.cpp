#include "tokenizer/py_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sb {

namespace {

// Python's float repr: the shortest round-trip digits, scientific notation
// when the exponent is < -4 or >= 16, a ".0" on integral values.
std::string py_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // buf is d.ddde[+-]XX: take digits and exponent apart.
  std::string s(buf);
  bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  size_t e = s.find('e');
  int exp = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    if (digits.size() <= static_cast<size_t>(exp) + 1) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
  }
  return neg ? "-" + out : out;
}

void dump(const nlohmann::ordered_json& v, std::string* out) {
  switch (v.type()) {
    case nlohmann::json::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out->append(", ");
        first = false;
        out->append(nlohmann::ordered_json(it.key()).dump());
        out->append(": ");
        dump(it.value(), out);
      }
      out->push_back('}');
      return;
    }
    case nlohmann::json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& e : v) {
        if (!first) out->append(", ");
        first = false;
        dump(e, out);
      }
      out->push_back(']');
      return;
    }
    case nlohmann::json::value_t::number_float:
      out->append(py_float(v.get<double>()));
      return;
    default:
      // Strings: nlohmann escapes exactly the set Python escapes with
      // ensure_ascii=False (quote, backslash, control characters).
      out->append(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

}  // namespace

std::string py_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  dump(value, &out);
  return out;
}

std::string py_str(const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::string:
      return v.get<std::string>();
    case nlohmann::json::value_t::boolean:
      return v.get<bool>() ? "True" : "False";
    case nlohmann::json::value_t::null:
      return "None";
    case nlohmann::json::value_t::number_float:
      return py_float(v.get<double>());
    default:
      return py_json_dumps(v);
  }
}

}  // namespace sb
