// The GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable
// code point, so that a vocabulary of byte strings can be stored as text in
// tokenizer.json. Printable Latin-1 bytes stand for themselves; the other 68
// bytes are shifted to U+0100.. in byte order.
//
// Constant tables built on first use; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sb::byte_level {

// Code point that stands for byte `b`.
uint32_t char_for_byte(uint8_t b);

// Byte that code point `cp` stands for, or -1 when cp is not in the alphabet.
int byte_for_char(uint32_t cp);

// Raw bytes of a byte-level string, or nullopt when some character is not in
// the alphabet (or `text` is not valid UTF-8).
std::optional<std::string> to_bytes(std::string_view text);

// Byte-level text of raw bytes.
std::string from_bytes(std::string_view bytes);

}  // namespace sb::byte_level
