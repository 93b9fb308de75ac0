// The shape of a JSON text, read in one linear pass without parsing it: how
// deep it nests and how many keys its objects hold. Callers refuse a text
// whose parse or later walk would cost more than its length suggests before
// parsing it: nlohmann's ordered_json finds each new key by a linear search
// (an object of n keys costs n^2 / 2 comparisons), and dumping or converting
// a value recurses once per level.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sb {

struct JsonShape {
  int depth = 0;          // deepest nesting of arrays and objects
  size_t most_keys = 0;   // keys of the largest object
  size_t keys = 0;        // keys of all objects together
};

// Bounds every JSON text read from a request is held to (server/protocols/request_parse.h
// applies them to bodies, tokenizer/chat_template.h to tool-call arguments):
// with both, parsing costs at most kMaxJsonKeys * kMaxJsonObjectKeys / 2 key
// comparisons (well under a second).
inline constexpr size_t kMaxJsonObjectKeys = 1024;
inline constexpr size_t kMaxJsonKeys = size_t{1} << 17;
inline constexpr int kMaxJsonDepth = 64;

// The shape of `text`, which need not be valid JSON (brackets and colons
// outside strings are counted as they come).
JsonShape json_shape(std::string_view text);

// Whether `s` is within all three bounds above.
inline bool json_shape_within_bounds(const JsonShape& s) {
  return s.depth <= kMaxJsonDepth && s.most_keys <= kMaxJsonObjectKeys && s.keys <= kMaxJsonKeys;
}

// The JSON texts from requests that this process parsed, by kind, counted
// by whoever parses one (thread-safe; /metrics shows them as
// statebank_json_parses_total{text}): a request's body is parsed once, and
// each of its tool calls' arguments once, however often it is rendered.
enum class JsonText { kBody, kToolArguments };
void count_json_parse(JsonText what);
uint64_t json_parses(JsonText what);

}  // namespace sb
