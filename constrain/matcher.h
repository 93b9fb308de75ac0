// Matcher: the byte-level automaton of a Grammar: which byte strings are
// prefixes of a text the grammar matches (its state: docs/text.md, "The
// matcher").
//  - advance() takes bytes one at a time; a byte no stack can take kills it;
//  - can_end(): the text so far is a complete match;
//  - min_rest(): the fewest further bytes that complete a match, or more,
//    never fewer (Constraint keeps every output finishable with it);
//  - copying is cheap (copy_from() reuses storage), so masks simulate each
//    candidate token on a copy; the copy is charged to the meter all the same.
// Not thread-safe; the Grammar must outlive it (it is held by shared_ptr).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "constrain/grammar.h"

namespace sb::constrain {

constexpr int kMaxDepth = 32;

struct Frame {
  const Node* node;
  int64_t count;   // array items, string/text code points, repeat items
  uint64_t used;   // object: properties seen; string/text: UTF-16 units (maxLength)
  int32_t trie;    // key or literal trie node; -1 off the trie
  int32_t index;   // object: property being read (props.size() = an additional key); seq: next part
  uint8_t state;
  uint8_t gap;     // whitespace gap progress (0 none, 1 after " ", 2+k after "\n" and k indents)
  uint8_t utf8_need, utf8_lo, utf8_hi;
  uint8_t hex;     // \u digits still due
  uint8_t flag;    // object key: an additional key is still possible
  uint8_t kmp[3];  // text: progress in the terminator and up to two forbidden strings
};

struct Stack {
  // Frames above `depth` are never read: left uninitialised, so a new
  // stack costs nothing and copies move only the live frames.
  Stack() {}
  int depth = 0;
  Frame f[kMaxDepth];
};

// Work done by matchers, counted in frames entered, frames copied (each
// anyOf fork and each copy_from() copies a stack per live alternative) and
// bytes compared (a text's terminator and forbidden strings): a budget
// that one mask (or one accepted token) may not exceed, so no request runs
// unbounded work (its mask runs on its own thread: engine/mask_worker.h). A
// matcher whose meter runs over its limit stops taking bytes (advance()
// returns false) until reset.
struct Meter {
  uint64_t used = 0;
  uint64_t limit = UINT64_MAX;
  bool over() const { return used > limit; }
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Counts this matcher's work in *meter (null: uncounted). copy_from()
  // keeps the matcher's own meter and charges it the frames copied.
  void set_meter(Meter* meter) { meter_ = meter; }

  bool advance(uint8_t b);
  bool advance(std::string_view bytes);
  bool dead() const { return stacks_.empty(); }
  bool can_end() const;
  int64_t min_rest() const;

  // A state in which every "plain" token (see Vocabulary) is accepted and
  // leaves the state the same but for the code point count: a single stack
  // whose top is inside a JSON string (kJsonString) or free text (kText) at
  // a character boundary. *room: UTF-16 units still allowed, -1 unlimited.
  enum class Plain { kNone, kJsonString, kText };
  Plain plain_state(int64_t* room) const;

  void copy_from(const Matcher& other);

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;
  std::vector<Stack> extra_;  // scratch for anyOf forks
  Meter* meter_ = nullptr;
};

}  // namespace sb::constrain
