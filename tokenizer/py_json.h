// JSON text exactly as Python's json.dumps(x, ensure_ascii=False) writes it,
// which is what the Hugging Face chat templates' `tojson` filter produces:
// ", " between items, ": " after keys, keys in their stored order, non-ASCII
// characters unescaped. Pure functions, thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sb {

std::string py_json_dumps(const nlohmann::ordered_json& value);

// Jinja's `| string` of a JSON scalar as Python's str() writes it: strings
// as-is, True/False/None, integers in decimal, floats as repr().
std::string py_str(const nlohmann::ordered_json& value);

}  // namespace sb
