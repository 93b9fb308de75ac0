// The filters, tests and methods the interpreter implements (builtins.cpp),
// with Python/jinja2 semantics. The parser asks the is_* functions so that a
// template naming anything else is refused when it is loaded.
// Pure functions; errors throw TemplateError at the given position.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "jinja/lexer.h"
#include "jinja/value.h"

namespace sb::jinja {

using Kwargs = std::vector<std::pair<std::string, Value>>;

bool is_filter(const std::string& name);
bool is_test(const std::string& name);
// Methods of strings (startswith, split, strip...) and dicts (items, get...).
bool is_method(const std::string& name);

// `operand | name(args, kwargs)`. select/reject/map take a test or filter
// name and so call back into these tables.
Value apply_filter(const std::string& name, const Value& operand, const std::vector<Value>& args,
                   const Kwargs& kwargs, Pos pos);
// `operand is name(args)`.
bool apply_test(const std::string& name, const Value& operand, const std::vector<Value>& args, Pos pos);
// `object.name(args, kwargs)` on a string or dict.
Value call_method(const Value& object, const std::string& name, const std::vector<Value>& args,
                  const Kwargs& kwargs, Pos pos);

// Python operators on values (+ - * / // % ** and the comparisons
// == != < > <= >= in).
Value binary_op(const std::string& op, const Value& a, const Value& b, Pos pos);
bool compare_op(const std::string& op, const Value& a, const Value& b, Pos pos);
// Iterating a value as Python would (lists, dict keys, string characters;
// Undefined is empty).
std::vector<Value> iterate(const Value& v, Pos pos);
// value[key] / value.attr as jinja2's getitem/getattr on data; Undefined
// when missing.
Value get_item(const Value& object, const Value& key, Pos pos);
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step, Pos pos);
// A data Value from a list of values (Undefined items are refused).
Value make_list(const std::vector<Value>& items, Pos pos);

}  // namespace sb::jinja
