// Template: a Jinja2 template parsed once and rendered over JSON context
// values, giving byte for byte what Python's jinja2 gives with the
// environment Hugging Face transformers uses for chat templates
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls,
// tojson = json.dumps(ensure_ascii=False), raise_exception).
//
// Implemented: {{ }}, {% if/elif/else %}, {% for %} (tuple targets, an `if`
// filter, else, loop.index/index0/revindex/revindex0/first/last/length/
// previtem/nextitem/cycle, break/continue), {% set %} (names, tuples,
// namespace attributes, block form), {% macro %} with defaults, {% filter %},
// {% with %}, {% raw %}, {% generation %}, comments and whitespace control;
// expressions with jinja2's precedence, literals, slicing, conditional
// expressions, the filters/tests/methods listed in builtins.cpp, and the
// functions raise_exception, namespace, range, dict.
// Everything else is refused by parse() with the construct and its line and
// column, so a template either runs as jinja2 runs it or is rejected when it
// is loaded. Known differences, none met in the chat templates we check:
// upper()/lower() use simple (one-to-one) case mapping; strings are not
// Markup (autoescaping is off in Hugging Face's environment); tuples are
// lists; integers are 64-bit.
//
// Thread-safety: parse() builds an immutable tree; render() is const and
// may run on many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace sb::jinja {

struct Program;

class Template {
 public:
  Template() = default;

  // kInvalidArgument naming the line, column and construct on any syntax
  // error or unsupported feature.
  static Status parse(std::string_view source, Template* out);

  // context: a JSON object whose members are the template's variables.
  // A template error (raise_exception, an undefined value used, a type
  // error) is kInvalidArgument with jinja2-like wording and the position.
  Status render(const nlohmann::ordered_json& context, std::string* out) const;

  bool empty() const { return program_ == nullptr; }

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace sb::jinja
