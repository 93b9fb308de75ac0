#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/split_regex.h"

#include <pcre2.h>

#include <stdexcept>

namespace sb {

namespace {

// Oniguruma's Unicode \s: U+0009..U+000D, U+0085 and the separators
// (Zs, Zl, Zp).
constexpr char kSpaceSet[] = "\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Per-thread scratch: match data and a JIT stack large enough for long
// whitespace runs, whose lookahead backtracks through the whole run.
struct ThreadScratch {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  ThreadScratch() {
    data = pcre2_match_data_create(1, nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (!data || !stack || !context) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadScratch& scratch() {
  thread_local ThreadScratch s;
  return s;
}

}  // namespace

Status translate_pattern(std::string_view p, std::string* out) {
  out->clear();
  bool in_class = false;
  size_t class_start = 0;  // index just past '[' or '[^'
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) return Status::invalid("pattern ends with a lone backslash");
      char e = p[i + 1];
      if (e == 's') {
        if (in_class) {
          out->append(kSpaceSet);
        } else {
          out->append("[").append(kSpaceSet).append("]");
        }
      } else if (e == 'S') {
        if (in_class) return Status::unsupported("\\S inside a character class");
        out->append("[^").append(kSpaceSet).append("]");
      } else {
        out->push_back(c);
        out->push_back(e);
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out->push_back(c);
      if (i + 1 < p.size() && p[i + 1] == '^') {
        out->push_back('^');
        ++i;
      }
      class_start = i + 1;
      continue;
    }
    if (in_class && c == ']' && i != class_start) {
      in_class = false;
      out->push_back(c);
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      // POSIX class such as [:alpha:]: copy through its closing ":]".
      size_t end = p.find(":]", i + 2);
      if (end == std::string_view::npos) return Status::invalid("unterminated POSIX class in pattern");
      out->append(p.substr(i, end + 2 - i));
      i = end + 1;
      continue;
    }
    out->push_back(c);
  }
  if (in_class) return Status::invalid("unterminated character class in pattern");
  return Status::ok();
}

struct SplitRegex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

SplitRegex::SplitRegex() = default;
SplitRegex::~SplitRegex() = default;
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;

Status SplitRegex::compile(std::string_view pattern, SplitRegex* out) {
  std::string translated;
  SB_RETURN_IF_ERROR(translate_pattern(pattern, &translated));
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code)
    return Status::invalid("split pattern does not compile at offset " + std::to_string(offset) + ": " +
                           pcre2_message(err));
  auto impl = std::make_unique<Impl>();
  impl->code = code;
  int jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  if (jit != 0) return Status::internal("PCRE2 JIT unavailable: " + pcre2_message(jit));
  out->impl_ = std::move(impl);
  return Status::ok();
}

void SplitRegex::split(std::string_view text, std::vector<std::string_view>* pieces) const {
  ThreadScratch& s = scratch();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, gap = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, s.data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw std::runtime_error("PCRE2 match failed: " + pcre2_message(rc));
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    size_t b = ov[0], e = ov[1];
    if (b > gap) pieces->push_back(text.substr(gap, b - gap));
    if (e > b) {
      pieces->push_back(text.substr(b, e - b));
      pos = gap = e;
    } else {
      // Empty match: step over one character and keep it in the next gap.
      pos = b + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  if (gap < text.size()) pieces->push_back(text.substr(gap));
}

}  // namespace sb
