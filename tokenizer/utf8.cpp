#include "tokenizer/utf8.h"

#include <cstring>

namespace sb::utf8 {

namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

// The Encoding standard's decoder state machine, reduced to what we need: we
// never build code points, we only decide which byte ranges are well-formed.
struct Decoder {
  int needed = 0, seen = 0;
  uint8_t lower = 0x80, upper = 0xBF;
  void reset() {
    needed = seen = 0;
    lower = 0x80;
    upper = 0xBF;
  }
};

}  // namespace

size_t repair(std::string_view in, bool final, std::string* out) {
  Decoder d;
  size_t start = 0;  // first byte of the sequence being decoded
  size_t i = 0;
  while (i < in.size()) {
    uint8_t b = static_cast<uint8_t>(in[i]);
    if (d.needed == 0) {
      start = i;
      if (b <= 0x7F) {
        out->push_back(static_cast<char>(b));
      } else if (b >= 0xC2 && b <= 0xDF) {
        d.needed = 1;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) d.lower = 0xA0;
        if (b == 0xED) d.upper = 0x9F;
        d.needed = 2;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) d.lower = 0x90;
        if (b == 0xF4) d.upper = 0x8F;
        d.needed = 3;
      } else {
        out->append(kReplacement);
      }
      ++i;
      continue;
    }
    if (b < d.lower || b > d.upper) {
      // The subpart [start, i) is ill-formed; byte i starts afresh.
      d.reset();
      out->append(kReplacement);
      continue;
    }
    d.lower = 0x80;
    d.upper = 0xBF;
    ++i;
    if (++d.seen == d.needed) {
      out->append(in.substr(start, i - start));
      d.reset();
    }
  }
  if (d.needed != 0) {
    if (!final) return start;
    out->append(kReplacement);
  }
  return in.size();
}

bool is_valid(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Eight ASCII bytes at a time.
    if (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    uint8_t b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    for (int k = 1; k <= need; ++k) {
      if (i + k >= n) return false;
      uint8_t c = p[i + k];
      if (c < lo || c > hi) return false;
      lo = 0x80;
      hi = 0xBF;
    }
    i += need + 1;
  }
  return true;
}

std::string repaired(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  repair(s, true, &out);
  return out;
}

void append(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t next(std::string_view s, size_t* i) {
  uint8_t b = static_cast<uint8_t>(s[*i]);
  int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[*i + k]) & 0x3F);
  *i += n;
  return cp;
}

}  // namespace sb::utf8
