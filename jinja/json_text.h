// JSON text exactly as Python's json.dumps(x, ensure_ascii=False, ...)
// writes it, which is what Hugging Face chat templates' `tojson` filter
// produces: ", " between items and ": " after keys (or "," and newlines
// with an indent), keys in their stored order unless sort_keys, non-ASCII
// characters unescaped. Pure functions, thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sb {

// indent < 0: one line; otherwise Python's indent=N layout.
std::string py_json_dumps(const nlohmann::ordered_json& value, int indent = -1, bool sort_keys = false);

// Python's repr() of a float: the shortest digits that read back the same,
// exponent form below 1e-4 and from 1e16, ".0" on integral values.
std::string py_float_repr(double v);

}  // namespace sb
