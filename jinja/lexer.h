// Lexer: template source to tokens, with the whitespace rules of jinja2 as
// Hugging Face configures it (trim_blocks, lstrip_blocks, keep_trailing_newline
// off):
//  - newlines are normalised to "\n" and one trailing newline is dropped;
//  - "{%-", "{{-", "{#-" strip all whitespace before the tag; "-%}", "-}}",
//    "-#}" all whitespace after it;
//  - trim_blocks: the first newline after a block or comment tag is removed
//    (not after "+%}");
//  - lstrip_blocks: spaces and tabs between the start of a line and a block
//    or comment tag are removed (not before "{%+");
//  - {% raw %}...{% endraw %} is data.
// Text between tags becomes kData tokens; inside a tag, names, literals and
// operators, ended by kBlockEnd / kVarEnd. Errors throw TemplateError (one
// render or parse owns the lexer; not thread-safe).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sb::jinja {

struct Pos {
  int line = 1;
  int col = 1;
};

// The one exception type inside the jinja part; Template (template.h) turns
// it into a Status at its boundary.
struct TemplateError : std::runtime_error {
  TemplateError(Pos p, const std::string& what)
      : std::runtime_error("line " + std::to_string(p.line) + ", column " + std::to_string(p.col) + ": " + what),
        pos(p) {}
  Pos pos;
};

enum class Tok { kData, kBlockBegin, kBlockEnd, kVarBegin, kVarEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;  // data text, name, decoded string, number text, operator
  Pos pos;
};

std::vector<Token> tokenize(std::string_view source);

}  // namespace sb::jinja
