#include "server/protocols/json_fields.h"

#include <cmath>
#include <cstdio>

#include "server/protocols/request_parse.h"

namespace sb::json_fields {

[[noreturn]] void fail(const std::string& param, const std::string& message) {
  throw ApiException{bad_request(param, message)};
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    case json::value_t::number_float:
      return "number";
    default:
      return "integer";
  }
}

[[noreturn]] void wrong_type(const std::string& param, const char* want, const json& got) {
  fail(param, "'" + param + "' must be " + want + ", got " + type_name(got));
}

// A field that is absent or null counts as not given.
const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Integers may arrive as 16 or 16.0; anything else is a type error. Values
// outside [lo, hi] are range errors, including ones beyond int64.
int64_t as_int(const json& v, const std::string& param, int64_t lo, int64_t hi) {
  auto range = [&]() {
    fail(param, "'" + param + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || static_cast<int64_t>(u) < lo) range();  // 0 is unsigned in JSON too
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) range();
    return i;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) wrong_type(param, "an integer", v);
    // 2^63 compares equal to double(INT64_MAX) but does not fit: reject it first.
    if (d >= 9223372036854775808.0 || d < static_cast<double>(lo) || d > static_cast<double>(hi)) range();
    return static_cast<int64_t>(d);
  }
  wrong_type(param, "an integer", v);
}

double as_number(const json& v, const std::string& param, double lo, double hi) {
  if (!v.is_number()) wrong_type(param, "a number", v);
  double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "'%s' must be a number in [%g, %g]", param.c_str(), lo, hi);
    fail(param, buf);
  }
  return d;
}

bool as_bool(const json& v, const std::string& param) {
  if (!v.is_boolean()) wrong_type(param, "a boolean", v);
  return v.get<bool>();
}

// Every string field but the prompt's text (as_text) is a name, an id or a
// short setting: bounded each, so that nothing a client sends is kept or
// echoed at any length (a cache_salt lives in namespaces and activity records).
const std::string& as_string(const json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, "a string", v);
  const std::string& s = v.get_ref<const std::string&>();
  if (s.size() > kMaxFieldBytes)
    throw ApiException{bad_request(param, "'" + param + "' is longer than " + std::to_string(kMaxFieldBytes) + " bytes",
                                   "string_too_long")};
  return s;
}

// The prompt's text (prompt, message contents, tool descriptions and call
// arguments): bounded together, by prompt_bytes_limit(), not one by one.
const std::string& as_text(const json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, "a string", v);
  return v.get_ref<const std::string&>();
}

// A client's key as it may appear in an error: keys are not bounded by the
// parser, so one is cut short before it is echoed.
std::string shown_key(const std::string& key) { return key.size() <= 64 ? key : key.substr(0, 64) + "..."; }

}  // namespace sb::json_fields
