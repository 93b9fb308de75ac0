// Values of the Jinja interpreter: JSON data (what chat templates read:
// messages, tools, strings, numbers) plus the few things a template makes
// that JSON cannot hold: Undefined, namespace() objects, macros, the `loop`
// of a for statement.
//
// Semantics follow Python, because the reference is jinja2 on CPython:
// truthiness (empty string/list/dict, 0, None and Undefined are false),
// equality (1 == 1.0 == true), str() and repr() text (True, None, floats as
// repr, {'a': 1}), strings indexed and measured in code points.
//
// JSON data is held through a shared pointer to an immutable node, so
// passing a message or a tools list around never copies it; a namespace is
// the only mutable value and is shared by reference, as in Python.
// Not thread-safe: one render owns its values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sb::jinja {

using Json = nlohmann::ordered_json;

struct MacroNode;  // ast.h
struct LoopState;  // interpreter.cpp
class Value;

struct Namespace;

enum class Builtin { kRaiseException, kNamespace, kRange, kDict };

class Value {
 public:
  enum class Kind { kUndefined, kData, kNamespace, kMacro, kBuiltin, kLoop };

  Value() = default;  // Undefined
  explicit Value(Json j) : kind_(Kind::kData), data_(std::make_shared<const Json>(std::move(j))) {}
  explicit Value(std::shared_ptr<const Json> j) : kind_(Kind::kData), data_(std::move(j)) {}
  static Value undefined(std::string hint = {}) {
    Value v;
    v.hint_ = std::move(hint);
    return v;
  }
  static Value of(std::shared_ptr<Namespace> ns);
  static Value of(const MacroNode* macro);
  static Value of(Builtin b);
  static Value of(std::shared_ptr<LoopState> loop);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_data() const { return kind_ == Kind::kData; }
  // JSON view; requires is_data().
  const Json& json() const { return *data_; }
  const std::shared_ptr<const Json>& shared() const { return data_; }
  // What an Undefined stands for ("'x' is undefined"), for error messages.
  const std::string& hint() const { return hint_; }
  const std::shared_ptr<Namespace>& ns() const { return ns_; }
  const MacroNode* macro() const { return macro_; }
  Builtin builtin() const { return builtin_; }
  const std::shared_ptr<LoopState>& loop() const { return loop_; }

  bool is_string() const { return is_data() && data_->is_string(); }
  bool is_none() const { return is_data() && data_->is_null(); }
  bool is_mapping() const { return is_data() && data_->is_object(); }
  bool is_list() const { return is_data() && data_->is_array(); }
  // Python int (bool included, as in Python) or float.
  bool is_number() const { return is_data() && (data_->is_number() || data_->is_boolean()); }
  bool is_callable() const { return kind_ == Kind::kMacro || kind_ == Kind::kBuiltin; }
  const std::string& str_ref() const { return data_->get_ref<const std::string&>(); }

 private:
  Kind kind_ = Kind::kUndefined;
  std::shared_ptr<const Json> data_;
  std::shared_ptr<Namespace> ns_;
  const MacroNode* macro_ = nullptr;
  Builtin builtin_ = Builtin::kRange;
  std::shared_ptr<LoopState> loop_;
  std::string hint_;
};

// A namespace() object: attributes that `set ns.attr = ...` may change from
// inside loops and macros.
struct Namespace {
  std::map<std::string, Value> attrs;
};

// Python's bool(value).
bool truthy(const Value& v);
// Python's str(value): strings as they are, True/False/None, floats as repr,
// containers as repr; Undefined is "".
std::string py_str(const Value& v);
std::string py_str(const Json& j);
// Python's repr() of JSON data ('text', [1, 'a'], {'k': None}).
std::string py_repr(const Json& j);
// Python's ==, across numeric types and containers.
bool py_equal(const Json& a, const Json& b);
bool py_equal(const Value& a, const Value& b);

// Code points of a valid UTF-8 string, and back.
std::vector<uint32_t> code_points(std::string_view s);
std::string from_code_points(const std::vector<uint32_t>& cps, size_t begin, size_t end);
size_t code_point_count(std::string_view s);

// Python's str.isspace() for one code point.
bool py_isspace(uint32_t cp);
// Python's str.strip/lstrip/rstrip: chars == nullptr strips whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);

}  // namespace sb::jinja
