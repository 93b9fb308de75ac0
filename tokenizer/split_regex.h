// SplitRegex: the pre-tokenizer's "Split, behaviour Isolated" step, on PCRE2
// (UTF + Unicode properties, JIT-compiled).
// Contract: split(text) cuts valid UTF-8 `text` into consecutive pieces whose
// concatenation is `text`: every leftmost match of the pattern is a piece, and
// so is every non-empty gap between matches. translate_pattern() makes PCRE2
// read tokenizer.json's patterns as Oniguruma, the engine they were written
// for, does (docs/text.md, "Tokenizer").
// Thread-safety: a compiled SplitRegex is immutable; split() may run on any
// number of threads at once (each thread keeps its own match data and JIT
// stack).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sb {

// Rewrites `\s` and `\S` as explicit Oniguruma-equivalent classes. `\S` inside
// a character class has no such spelling and is refused.
Status translate_pattern(std::string_view pattern, std::string* out);

class SplitRegex {
 public:
  SplitRegex();
  ~SplitRegex();
  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;

  // `pattern` as stored in tokenizer.json (before translation).
  static Status compile(std::string_view pattern, SplitRegex* out);

  // REQUIRES: `text` is valid UTF-8. Appends the pieces to `pieces`.
  void split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sb
