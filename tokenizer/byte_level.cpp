#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace sb::byte_level {

namespace {

struct Tables {
  std::array<uint32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // indexed by code point; all chars are < 0x144
  Tables() {
    to_byte.fill(-1);
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    uint32_t shifted = 0x100;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : shifted++;
      to_char[b] = cp;
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t char_for_byte(uint8_t b) { return tables().to_char[b]; }

int byte_for_char(uint32_t cp) { return cp < tables().to_byte.size() ? tables().to_byte[cp] : -1; }

std::optional<std::string> to_bytes(std::string_view text) {
  if (!utf8::is_valid(text)) return std::nullopt;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    int b = byte_for_char(utf8::next(text, &i));
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

std::string from_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(char_for_byte(static_cast<uint8_t>(c)), &out);
  return out;
}

}  // namespace sb::byte_level
