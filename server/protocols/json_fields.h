// Typed reads of request JSON fields, shared by the routes' parsers
// (server/protocols/request_parse.cpp, server/protocols/anthropic/messages_parse.cpp): each checks the
// type and range and throws ApiException (400) whose `param` names the field.
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/protocols/errors.h"

namespace sb::json_fields {

using json = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& param, const std::string& message);
const char* type_name(const json& v);
[[noreturn]] void wrong_type(const std::string& param, const char* want, const json& got);
// A field that is absent or null counts as not given (null).
const json* field(const json& obj, const char* name);
// Integers may arrive as 16 or 16.0; values outside [lo, hi] are range errors.
int64_t as_int(const json& v, const std::string& param, int64_t lo, int64_t hi);
double as_number(const json& v, const std::string& param, double lo, double hi);
bool as_bool(const json& v, const std::string& param);
// A name, id or setting: at most kMaxFieldBytes (else 400 string_too_long).
const std::string& as_string(const json& v, const std::string& param);
// Prompt text: bounded as a whole by the caller (prompt_bytes_limit()).
const std::string& as_text(const json& v, const std::string& param);
// A client's key cut short before it is echoed in an error.
std::string shown_key(const std::string& key);

}  // namespace sb::json_fields
