// The field reader config.cpp and the families' own parsers share: reads
// fields of one JSON object, naming the field and the file in errors.
// Internal to model/.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace sb {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& obj, std::string source, std::string where)
      : obj_(obj), source_(std::move(source)), where_(std::move(where)) {}

  bool has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  Status error(const std::string& field, const std::string& what) const {
    return Status::invalid(source_ + ": field '" + where_ + field + "' " + what);
  }
  Status get_int(const char* key, int64_t* out, bool required, int64_t lo = 1) const {
    if (!has(key)) return required ? error(key, "is missing") : Status::ok();
    const nlohmann::json& v = obj_[key];
    if (!v.is_number_integer()) return error(key, "must be an integer");
    int64_t x = v.get<int64_t>();
    if (x < lo) return error(key, "is " + std::to_string(x) + ", must be >= " + std::to_string(lo));
    *out = x;
    return Status::ok();
  }
  Status get_double(const char* key, double* out) const {
    if (!has(key)) return Status::ok();
    const nlohmann::json& v = obj_[key];
    if (!v.is_number()) return error(key, "must be a number");
    *out = v.get<double>();
    return Status::ok();
  }
  Status get_bool(const char* key, bool* out) const {
    if (!has(key)) return Status::ok();
    const nlohmann::json& v = obj_[key];
    if (!v.is_boolean()) return error(key, "must be true or false");
    *out = v.get<bool>();
    return Status::ok();
  }
  const nlohmann::json& obj() const { return obj_; }
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& obj_;
  std::string source_;
  std::string where_;
};

}  // namespace sb
