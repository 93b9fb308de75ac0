// Template: a Jinja2 template parsed once and rendered over JSON context
// values, giving byte for byte what Python's jinja2 gives with the
// environment Hugging Face transformers uses for chat templates.
// Contract:
//  - parse() accepts the constructs docs/text.md ("Jinja") lists and refuses
//    everything else with the construct, its line and column: a template
//    either runs as jinja2 runs it or is rejected when it is loaded;
//  - the known differences from jinja2, none met in the chat templates we
//    check, are listed there too.
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
