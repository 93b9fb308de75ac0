// UTF-8 helpers shared by the tokenizer, the stream decoder and the parsers.
//
// Invalid input is never rejected here: it is repaired the way the WHATWG
// Encoding standard (and Rust's from_utf8_lossy) does it, one U+FFFD per
// maximal ill-formed subpart, so that every byte sequence maps to exactly one
// valid string and the result is the same whether the bytes arrive at once or
// in pieces. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sb::utf8 {

// True when `s` is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool is_valid(std::string_view s);

// Appends the repaired form of `in` to `out` and returns how many input bytes
// were consumed. With final=false a trailing sequence that is incomplete but
// could still become valid is left unconsumed (and nothing is emitted for it),
// so a caller can prepend it to the next chunk; with final=true everything is
// consumed and an incomplete tail becomes one U+FFFD.
size_t repair(std::string_view in, bool final, std::string* out);

// Repaired copy of `s` (the identity for valid input).
std::string repaired(std::string_view s);

// Appends the UTF-8 form of code point `cp` (which must be a scalar value).
void append(uint32_t cp, std::string* out);

// Decodes the code point starting at s[*i] of a VALID string and advances *i.
uint32_t next(std::string_view s, size_t* i);

}  // namespace sb::utf8
