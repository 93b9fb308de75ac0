// Parser: tokens to a syntax tree, with jinja2's operator precedence
// (or < and < not < comparisons < + - < ~ < * / // % < ** < unary - <
// filters, tests, calls, attributes and subscripts).
//
// Everything the interpreter does not implement is refused here, naming the
// construct and its position: an unknown statement ({% include %},
// {% call %}, {% extends %}...), filter, test, string or dict method, or a
// call of a function that is neither a builtin (raise_exception, namespace,
// range, dict) nor a macro of the template. So a template that parses runs
// without meeting an unimplemented feature. Throws TemplateError.
#pragma once

#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace sb::jinja {

Body parse(const std::vector<Token>& tokens);

}  // namespace sb::jinja
