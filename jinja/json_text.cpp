#include "jinja/json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace sb {

std::string py_float_repr(double v) {
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

namespace {

void newline(int indent, int depth, std::string* out) {
  out->push_back('\n');
  out->append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
}

void dump(const nlohmann::ordered_json& v, int indent, bool sort_keys, int depth, std::string* out) {
  switch (v.type()) {
    case nlohmann::json::value_t::object: {
      if (v.empty()) {
        out->append("{}");
        return;
      }
      std::vector<std::pair<const std::string*, const nlohmann::ordered_json*>> items;
      for (auto it = v.begin(); it != v.end(); ++it) items.emplace_back(&it.key(), &it.value());
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
      out->push_back('{');
      bool first = true;
      for (const auto& [key, value] : items) {
        if (!first) out->append(indent >= 0 ? "," : ", ");
        first = false;
        if (indent >= 0) newline(indent, depth + 1, out);
        out->append(nlohmann::ordered_json(*key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        out->append(": ");
        dump(*value, indent, sort_keys, depth + 1, out);
      }
      if (indent >= 0) newline(indent, depth, out);
      out->push_back('}');
      return;
    }
    case nlohmann::json::value_t::array: {
      if (v.empty()) {
        out->append("[]");
        return;
      }
      out->push_back('[');
      bool first = true;
      for (const auto& e : v) {
        if (!first) out->append(indent >= 0 ? "," : ", ");
        first = false;
        if (indent >= 0) newline(indent, depth + 1, out);
        dump(e, indent, sort_keys, depth + 1, out);
      }
      if (indent >= 0) newline(indent, depth, out);
      out->push_back(']');
      return;
    }
    case nlohmann::json::value_t::number_float:
      out->append(py_float_repr(v.get<double>()));
      return;
    default:
      // Strings: nlohmann escapes exactly the set Python escapes with
      // ensure_ascii=False (quote, backslash, control characters).
      out->append(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

}  // namespace

std::string py_json_dumps(const nlohmann::ordered_json& value, int indent, bool sort_keys) {
  std::string out;
  dump(value, indent, sort_keys, 0, &out);
  return out;
}

}  // namespace sb
