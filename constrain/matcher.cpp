#include "constrain/matcher.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>

namespace sb::constrain {

namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;
constexpr size_t kMaxStacks = 256;
constexpr uint8_t kMaxIndent = 20;

int64_t add(int64_t a, int64_t b) { return std::min(kInf, a + b); }

// States per node kind.
enum : uint8_t { O_OPEN, O_FIRST, O_KEY, O_COLON, O_VALUE, O_NEXT, O_KEY_START };
enum : uint8_t { X_WANT, X_KEY, X_VALUE };
enum : uint8_t { A_OPEN, A_FIRST, A_NEXT, A_ITEM };
enum : uint8_t { S_OPEN, S_BODY, S_ESC, S_HEX };
enum : uint8_t { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };
enum : uint8_t { R_ITEM, R_AFTER, R_SEP };

Frame init(const Node* n) {
  Frame f;
  std::memset(&f, 0, sizeof f);
  f.node = n;
  f.trie = 0;
  return f;
}

bool bit(uint64_t used, size_t i) { return (used >> i) & 1u; }

bool required_done(const Node& n, uint64_t used) {
  for (size_t i = 0; i < n.props.size(); ++i)
    if (n.props[i].required && !bit(used, i)) return false;
  return true;
}

// A whitespace byte taken as part of the gap between JSON tokens.
bool take_gap(Frame& f, uint8_t b) {
  if (b == ' ') {
    if (f.gap == 0) {
      f.gap = 1;
      return true;
    }
    if (f.gap >= 2 && f.gap < 2 + kMaxIndent) {
      ++f.gap;
      return true;
    }
    return false;
  }
  if (b == '\t') {
    if (f.gap >= 2 && f.gap < 2 + kMaxIndent) {
      ++f.gap;
      return true;
    }
    return false;
  }
  if (b == '\n' && f.gap == 0) {
    f.gap = 2;
    return true;
  }
  return false;
}

// UTF-8 structure: a lead byte sets how many continuation bytes follow and
// the range of the first; false for a byte that cannot start a character.
bool utf8_lead(Frame& f, uint8_t b) {
  f.utf8_lo = 0x80;
  f.utf8_hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) f.utf8_need = 1;
  else if (b == 0xE0) f.utf8_need = 2, f.utf8_lo = 0xA0;
  else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) f.utf8_need = 2;
  else if (b == 0xED) f.utf8_need = 2, f.utf8_hi = 0x9F;
  else if (b == 0xF0) f.utf8_need = 3, f.utf8_lo = 0x90;
  else if (b >= 0xF1 && b <= 0xF3) f.utf8_need = 3;
  else if (b == 0xF4) f.utf8_need = 3, f.utf8_hi = 0x8F;
  else return false;
  return true;
}

// A continuation byte; true when it completes a character.
bool utf8_continue(Frame& f, uint8_t b, bool* ok) {
  *ok = b >= f.utf8_lo && b <= f.utf8_hi;
  f.utf8_lo = 0x80;
  f.utf8_hi = 0xBF;
  return *ok && --f.utf8_need == 0;
}

// Length of the longest suffix of (pat[0:k] + b) that is a prefix of pat;
// adds the bytes it compared to *compared (the meter's charge).
uint8_t kmp_step(const std::string& pat, uint8_t k, uint8_t b, uint64_t* compared) {
  ++*compared;
  if (pat.empty()) return 0;
  if (k < pat.size() && static_cast<uint8_t>(pat[k]) == b) return static_cast<uint8_t>(k + 1);
  // A suffix of length len ends in b and starts with pat[k + 1 - len, k).
  for (size_t len = std::min<size_t>(k + 1, pat.size() - 1); len > 0; --len) {
    *compared += len;
    if (static_cast<uint8_t>(pat[len - 1]) == b && std::memcmp(pat.data() + k + 1 - len, pat.data(), len - 1) == 0)
      return static_cast<uint8_t>(len);
  }
  return 0;
}

int64_t member_cost(const Node& n, size_t i) {
  return add(static_cast<int64_t>(n.keys.strings[i].size()) + (n.xml ? 0 : 1), n.props[i].value->min_bytes);
}

// Bytes of the members still required, and how many there are.
int64_t required_cost(const Node& n, uint64_t used, int64_t* k) {
  int64_t sum = 0;
  *k = 0;
  for (size_t i = 0; i < n.props.size(); ++i)
    if (n.props[i].required && !bit(used, i)) {
      sum = add(sum, member_cost(n, i));
      ++*k;
    }
  return sum;
}

// JSON object: after a member (or the "{" when first), what closes it.
int64_t json_close_cost(const Node& n, uint64_t used, bool first) {
  int64_t k;
  int64_t sum = required_cost(n, used, &k);
  if (k == 0) return 1;
  return add(sum, (first ? k - 1 : k) + 1);
}

int64_t xml_close_cost(const Node& n, uint64_t used) {
  int64_t k;
  return add(required_cost(n, used, &k), static_cast<int64_t>(std::string("</function>").size()));
}

int64_t value_cost(const Node& n, int32_t index) {
  const Node* v = static_cast<size_t>(index) < n.props.size() ? n.props[static_cast<size_t>(index)].value : n.additional;
  return v ? v->min_bytes : kInf;
}

uint64_t with(uint64_t used, int32_t index, const Node& n) {
  return static_cast<size_t>(index) < n.props.size() ? used | (uint64_t{1} << index) : used;
}

// The rest_* helpers: fewest bytes to finish frame f, of their kind, when it
// is the top of its stack.
int64_t rest_xml_object(const Frame& f) {
  const Node& n = *f.node;
  if (f.state == X_WANT) return xml_close_cost(n, f.used);
  if (f.state == X_VALUE) return add(value_cost(n, f.index), xml_close_cost(n, with(f.used, f.index, n)));
  int64_t best = kInf;  // X_KEY
  const auto& e = n.keys.nodes[static_cast<size_t>(f.trie)];
  for (int32_t i : e.below) {
    int64_t left = static_cast<int64_t>(n.keys.strings[static_cast<size_t>(i)].size()) - e.depth;
    if (static_cast<size_t>(i) == n.props.size()) {
      if (required_done(n, f.used)) best = std::min(best, left);
    } else if (!bit(f.used, static_cast<size_t>(i))) {
      best = std::min(best, add(left, add(value_cost(n, i), xml_close_cost(n, with(f.used, i, n)))));
    }
  }
  return best;
}

int64_t rest_json_object(const Frame& f) {
  const Node& n = *f.node;
  switch (f.state) {
    case O_OPEN: return n.min_bytes;
    case O_FIRST: return json_close_cost(n, f.used, true);
    case O_NEXT: return json_close_cost(n, f.used, false);
    case O_COLON: return add(1 + value_cost(n, f.index), json_close_cost(n, with(f.used, f.index, n), false));
    case O_VALUE: return add(value_cost(n, f.index), json_close_cost(n, with(f.used, f.index, n), false));
    case O_KEY_START: {
      int64_t k;
      int64_t sum = required_cost(n, f.used, &k);
      if (k > 0) return add(sum, k);
      int64_t best = n.additional ? add(4, n.additional->min_bytes) : kInf;
      for (size_t i = 0; i < n.props.size(); ++i)
        if (!bit(f.used, i)) best = std::min(best, add(member_cost(n, i), 1));
      return best;
    }
    case O_KEY: {
      int64_t best = kInf;
      if (f.trie >= 0) {
        const auto& e = n.keys.nodes[static_cast<size_t>(f.trie)];
        for (int32_t i : e.below)
          if (!bit(f.used, static_cast<size_t>(i))) {
            int64_t left = static_cast<int64_t>(n.keys.strings[static_cast<size_t>(i)].size()) - e.depth;
            best = std::min(best, add(left + 1 + n.props[static_cast<size_t>(i)].value->min_bytes,
                                      json_close_cost(n, with(f.used, i, n), false)));
          }
      }
      if (f.flag && f.utf8_need == 0)
        best = std::min(best, add(2 + n.additional->min_bytes, json_close_cost(n, f.used, false)));
      else if (f.flag)
        best = std::min(best, add(f.utf8_need + 2 + n.additional->min_bytes, json_close_cost(n, f.used, false)));
      return best;
    }
  }
  return kInf;
}

int64_t rest_array(const Frame& f) {
  const Node& n = *f.node;
  const int64_t item = n.item->min_bytes;
  switch (f.state) {
    case A_OPEN: return n.min_bytes;
    case A_FIRST: return n.min_items > 0 ? add(n.min_items * std::min(item, kInf / (n.min_items + 1)) + n.min_items - 1, 1) : 1;
    case A_NEXT: {
      int64_t need = std::max<int64_t>(0, n.min_items - f.count);
      return add(need * std::min(add(item, 1), kInf / (need + 1)), 1);
    }
    case A_ITEM: {
      int64_t need = std::max<int64_t>(0, n.min_items - f.count - 1);
      return add(add(item, need * std::min(add(item, 1), kInf / (need + 1))), 1);
    }
  }
  return kInf;
}

int64_t rest_string(const Frame& f) {
  const Node& n = *f.node;
  int64_t cps = std::max<int64_t>(0, n.min_len - f.count);
  switch (f.state) {
    case S_OPEN: return n.min_bytes;
    case S_BODY: return f.utf8_need + std::max<int64_t>(0, cps - (f.utf8_need ? 1 : 0)) + 1;
    case S_ESC: return 1 + std::max<int64_t>(0, cps - 1) + 1;
    case S_HEX: return f.hex + std::max<int64_t>(0, cps - 1) + 1;
  }
  return kInf;
}

int64_t rest_repeat(const Frame& f) {
  const Node& n = *f.node;
  const int64_t one = add(n.item->min_bytes, n.separator->min_bytes);
  if (f.state == R_AFTER) {
    int64_t need = std::max<int64_t>(0, n.min_items - f.count);
    return need * std::min(one, kInf / (need + 1));
  }
  int64_t need = std::max<int64_t>(0, n.min_items - f.count - 1);
  return add(n.item->min_bytes, need * std::min(one, kInf / (need + 1)));
}

// Fewest bytes to finish frame f when it is the top of its stack.
int64_t rest_top(const Frame& f) {
  const Node& n = *f.node;
  switch (n.kind) {
    case Node::Kind::kObject: return n.xml ? rest_xml_object(f) : rest_json_object(f);
    case Node::Kind::kArray: return rest_array(f);
    case Node::Kind::kString: return rest_string(f);
    case Node::Kind::kNumber:
    case Node::Kind::kInteger:
      switch (f.state) {
        case N_START:
        case N_MINUS:
        case N_DOT:
        case N_E:
        case N_ESIGN: return 1;
        default: return 0;
      }
    case Node::Kind::kLiterals: {
      int64_t best = kInf;
      const auto& e = n.literal_trie.nodes[static_cast<size_t>(f.trie)];
      for (int32_t i : e.below)
        best = std::min(best, static_cast<int64_t>(n.texts[static_cast<size_t>(i)].size()) - e.depth);
      return best;
    }
    case Node::Kind::kAnyOf: return n.min_bytes;
    case Node::Kind::kSeq: {
      int64_t sum = 0;
      for (size_t i = static_cast<size_t>(f.index); i < n.alts.size(); ++i) sum = add(sum, n.alts[i]->min_bytes);
      return sum;
    }
    case Node::Kind::kRepeat: return rest_repeat(f);
    case Node::Kind::kText: {
      int64_t cps = std::max<int64_t>(0, n.min_len - (f.count - f.kmp[0]));
      return f.utf8_need + cps + static_cast<int64_t>(n.terminator.size()) - f.kmp[0];
    }
  }
  return kInf;
}

// The parent's state once its active child has finished; true when that
// finishes the parent too.
bool child_done(Frame& p) {
  const Node& n = *p.node;
  switch (n.kind) {
    case Node::Kind::kObject:
      p.used = with(p.used, p.index, n);
      p.state = n.xml ? uint8_t{X_WANT} : uint8_t{O_NEXT};
      p.trie = 0;
      p.gap = 0;
      return false;
    case Node::Kind::kArray:
      ++p.count;
      p.state = A_NEXT;
      p.gap = 0;
      return false;
    case Node::Kind::kSeq:
      ++p.index;
      return static_cast<size_t>(p.index) >= n.alts.size();
    case Node::Kind::kRepeat:
      if (p.state == R_ITEM) {
        ++p.count;
        p.state = R_AFTER;
      } else {
        p.state = R_ITEM;
      }
      return false;
    default:
      return false;
  }
}

// Pops the finished top frame and lets its parents know.
void close(Stack& s) {
  --s.depth;
  while (s.depth > 0 && child_done(s.f[s.depth - 1])) --s.depth;
}

// Can the top frame end here (no byte needed), for values whose end is only
// known from the next byte?
bool accepting(const Frame& f) {
  const Node& n = *f.node;
  switch (n.kind) {
    case Node::Kind::kNumber:
    case Node::Kind::kInteger:
      return f.state == N_ZERO || f.state == N_INT || f.state == N_FRAC || f.state == N_EXP;
    case Node::Kind::kLiterals:
      return n.literal_trie.nodes[static_cast<size_t>(f.trie)].terminal >= 0;
    case Node::Kind::kRepeat:
      return f.state == R_AFTER && f.count >= n.min_items;
    default:
      return false;
  }
}

// What one byte's walk over a stack shares: the stacks that anyOf forks add,
// and the meter its work counts against.
struct Walk {
  std::vector<Stack>* extra;
  Meter* meter;
  bool spent() const { return meter && ++meter->used > meter->limit; }
  void charge(uint64_t work) const {
    if (meter) meter->used += work;
  }
};

// A stack's live frames into dst (never the whole array: an anyOf fork
// costs what its stack holds); charged to the walk's meter.
void copy_stack(Stack& dst, const Stack& src, const Walk* walk) {
  dst.depth = src.depth;
  std::memcpy(dst.f, src.f, sizeof(Frame) * static_cast<size_t>(src.depth));
  walk->charge(static_cast<uint64_t>(src.depth));
}

bool feed(Stack& s, uint8_t b, Walk* extra);

bool push_and_feed(Stack& s, const Node* n, uint8_t b, Walk* extra) {
  if (extra->spent()) return false;
  if (n->kind == Node::Kind::kAnyOf) {
    // s stays as it is until the first alternative takes it, last.
    for (size_t i = 1; i < n->alts.size(); ++i) {
      Stack c;
      copy_stack(c, s, extra);
      if (push_and_feed(c, n->alts[i], b, extra) && extra->extra->size() < kMaxStacks)
        copy_stack(extra->extra->emplace_back(), c, extra);
    }
    return push_and_feed(s, n->alts[0], b, extra);
  }
  if (s.depth >= kMaxDepth) return false;
  s.f[s.depth++] = init(n);
  return feed(s, b, extra);
}

bool feed_text(Stack& s, Frame& f, uint8_t b, const Walk* walk) {
  const Node& n = *f.node;
  if (f.utf8_need > 0) {
    bool ok;
    if (utf8_continue(f, b, &ok)) ++f.count;
    if (!ok) return false;
  } else if (b < 0x80) {
    if (b < 0x20 && b != '\t' && b != '\n' && b != '\r') return false;
    ++f.count;
    ++f.used;
  } else if (!utf8_lead(f, b)) {
    return false;
  } else {
    f.used += b >= 0xF0 ? 2 : 1;  // UTF-16 units, for maxLength
  }
  uint64_t compared = 0;
  f.kmp[0] = kmp_step(n.terminator, f.kmp[0], b, &compared);
  if (f.kmp[0] == n.terminator.size()) {
    int64_t len = f.count - static_cast<int64_t>(n.terminator.size());
    int64_t units = static_cast<int64_t>(f.used) - static_cast<int64_t>(n.terminator.size());
    if (len < n.min_len || (n.max_len >= 0 && units > n.max_len)) return false;
    close(s);
    return true;
  }
  for (size_t i = 0; i < n.forbidden.size() && i < 2; ++i) {
    f.kmp[i + 1] = kmp_step(n.forbidden[i], f.kmp[i + 1], b, &compared);
    if (f.kmp[i + 1] == n.forbidden[i].size()) break;
  }
  walk->charge(compared);
  for (size_t i = 0; i < n.forbidden.size() && i < 2; ++i)
    if (f.kmp[i + 1] == n.forbidden[i].size()) return false;
  // Characters that may still turn out to be the terminator do not count yet.
  if (n.max_len >= 0 && static_cast<int64_t>(f.used) - f.kmp[0] > n.max_len) return false;
  return true;
}

// The feed_* helpers take byte b on the top frame f of stack s, one per node
// kind; each returns whether b was taken (the number, literal and repeat ones:
// false when f may end before b, which feed() then hands to what follows).
inline bool feed_xml_object(Stack& s, Frame& f, uint8_t b, Walk* extra) {
  const Node& n = *f.node;
  if (f.state == X_VALUE) return push_and_feed(s, n.props[static_cast<size_t>(f.index)].value, b, extra);
  int32_t t = n.keys.step(f.trie, b);
  if (t < 0) return false;
  f.trie = t;
  f.state = X_KEY;
  int32_t term = n.keys.nodes[static_cast<size_t>(t)].terminal;
  if (term < 0) return true;
  if (static_cast<size_t>(term) == n.props.size()) {
    if (!required_done(n, f.used)) return false;
    close(s);
    return true;
  }
  if (bit(f.used, static_cast<size_t>(term))) return false;
  f.index = term;
  f.state = X_VALUE;
  return true;
}

inline bool feed_json_key(Frame& f, uint8_t b) {
  const Node& n = *f.node;
  int32_t t = f.trie >= 0 ? n.keys.step(f.trie, b) : -1;
  if (t >= 0 && n.keys.nodes[static_cast<size_t>(t)].terminal >= 0) {
    int32_t term = n.keys.nodes[static_cast<size_t>(t)].terminal;
    if (bit(f.used, static_cast<size_t>(term))) return false;
    f.index = term;
    f.state = O_COLON;
    return true;
  }
  if (b == '"') {
    if (!f.flag || f.utf8_need > 0) return false;
    f.index = static_cast<int32_t>(n.props.size());
    f.state = O_COLON;
    return true;
  }
  f.trie = t;
  if (f.flag) {
    // Additional keys are written plainly: no escapes, valid UTF-8.
    if (f.utf8_need > 0) {
      bool ok;
      utf8_continue(f, b, &ok);
      if (!ok) f.flag = 0;
    } else if (b == '\\' || b < 0x20 || (b >= 0x80 && !utf8_lead(f, b))) {
      f.flag = 0;
    }
  }
  return f.trie >= 0 || f.flag;
}

inline bool feed_json_object(Stack& s, Frame& f, uint8_t b, Walk* extra) {
  const Node& n = *f.node;
  switch (f.state) {
    case O_OPEN:
      if (b != '{') return false;
      f.state = O_FIRST;
      return true;
    case O_FIRST:
    case O_KEY_START:
      if (take_gap(f, b)) return true;
      if (b == '}' && f.state == O_FIRST) {
        if (!required_done(n, f.used)) return false;
        close(s);
        return true;
      }
      if (b != '"') return false;
      f.gap = 0;
      f.trie = n.keys.step(0, b);
      f.flag = n.additional != nullptr;
      f.utf8_need = 0;
      f.state = O_KEY;
      return f.trie >= 0 || f.flag;
    case O_KEY:
      return feed_json_key(f, b);
    case O_COLON:
      if (take_gap(f, b)) return true;
      if (b != ':') return false;
      f.gap = 0;
      f.state = O_VALUE;
      return true;
    case O_VALUE:
      if (take_gap(f, b)) return true;
      f.gap = 0;
      return push_and_feed(s, static_cast<size_t>(f.index) < n.props.size() ? n.props[static_cast<size_t>(f.index)].value
                                                                             : n.additional,
                           b, extra);
    case O_NEXT:
      if (take_gap(f, b)) return true;
      if (b == '}') {
        if (!required_done(n, f.used)) return false;
        close(s);
        return true;
      }
      if (b != ',') return false;
      {
        bool more = n.additional != nullptr;
        for (size_t i = 0; i < n.props.size() && !more; ++i) more = !bit(f.used, i);
        if (!more) return false;
      }
      f.gap = 0;
      f.state = O_KEY_START;
      return true;
  }
  return false;
}

inline bool feed_array(Stack& s, Frame& f, uint8_t b, Walk* extra) {
  const Node& n = *f.node;
  switch (f.state) {
    case A_OPEN:
      if (b != '[') return false;
      f.state = A_FIRST;
      return true;
    case A_FIRST:
    case A_ITEM:
      if (take_gap(f, b)) return true;
      if (b == ']' && f.state == A_FIRST) {
        if (n.min_items > 0) return false;
        close(s);
        return true;
      }
      if (n.max_items >= 0 && f.count >= n.max_items) return false;
      f.gap = 0;
      f.state = A_ITEM;
      return push_and_feed(s, n.item, b, extra);
    case A_NEXT:
      if (take_gap(f, b)) return true;
      if (b == ']') {
        if (f.count < n.min_items) return false;
        close(s);
        return true;
      }
      if (b != ',' || (n.max_items >= 0 && f.count >= n.max_items)) return false;
      f.gap = 0;
      f.state = A_ITEM;
      return true;
  }
  return false;
}

inline bool feed_string(Stack& s, Frame& f, uint8_t b) {
  const Node& n = *f.node;
  switch (f.state) {
    case S_OPEN:
      if (b != '"') return false;
      f.state = S_BODY;
      return true;
    case S_BODY:
      if (f.utf8_need > 0) {
        bool ok;
        if (utf8_continue(f, b, &ok)) ++f.count;
        return ok;
      }
      if (b == '"') {
        if (f.count < n.min_len) return false;
        close(s);
        return true;
      }
      if (b < 0x20) return false;
      // maxLength counts UTF-16 units (f.used), as JavaScript validators
      // do; a character outside the BMP is two.
      if (n.max_len >= 0 && static_cast<int64_t>(f.used) + (b >= 0xF0 ? 2 : 1) > n.max_len) return false;
      if (b == '\\') {
        f.state = S_ESC;
        f.used += 1;
        return true;
      }
      if (b < 0x80) {
        ++f.count;
        ++f.used;
        return true;
      }
      f.used += b >= 0xF0 ? 2 : 1;
      return utf8_lead(f, b);
    case S_ESC:
      if (b == 'u') {
        f.hex = 4;
        f.state = S_HEX;
        return true;
      }
      if (!std::strchr("\"\\/bfnrt", b) || b == 0) return false;
      ++f.count;
      f.state = S_BODY;
      return true;
    case S_HEX:
      if (!std::isxdigit(b)) return false;
      // No escaped surrogates: validators disagree on how they count.
      if (f.hex == 4) f.utf8_lo = static_cast<uint8_t>(std::tolower(b));
      if (f.hex == 3 && f.utf8_lo == 'd' && std::strchr("89abcdefABCDEF", b)) return false;
      if (--f.hex == 0) {
        ++f.count;
        f.state = S_BODY;
      }
      return true;
  }
  return false;
}

// Digits per part are bounded so that every parser reads a finite double
// (integers exactly): 15 integer, 15 fraction, 2 exponent.
inline bool feed_number(Frame& f, uint8_t b) {
  const Node& n = *f.node;
  const bool real = n.kind == Node::Kind::kNumber;
  const bool digit = b >= '0' && b <= '9';
  uint8_t next = 255;
  bool new_part = false;
  switch (f.state) {
    case N_START:
      if (b == '-' && !n.non_negative) next = N_MINUS;
      else if (b == '0') next = N_ZERO;
      else if (digit) next = N_INT;
      break;
    case N_MINUS:
      if (b == '0') next = N_ZERO;
      else if (digit) next = N_INT;
      break;
    case N_ZERO:
    case N_INT:
      if (digit && f.state == N_INT) next = N_INT;
      else if (real && b == '.') next = N_DOT, new_part = true;
      else if (real && (b == 'e' || b == 'E')) next = N_E, new_part = true;
      break;
    case N_DOT:
    case N_FRAC:
      if (digit) next = N_FRAC;
      else if (f.state == N_FRAC && (b == 'e' || b == 'E')) next = N_E, new_part = true;
      break;
    case N_E:
      if (b == '+' || b == '-') next = N_ESIGN;
      else if (digit) next = N_EXP;
      break;
    case N_ESIGN:
    case N_EXP:
      if (digit) next = N_EXP;
      break;
  }
  if (next != 255 && digit) {
    const int64_t limit = next == N_EXP ? 2 : 15;
    if (f.count >= limit) next = 255;
    else ++f.count;
  }
  if (next == 255) return false;
  if (new_part) f.count = 0;
  f.state = next;
  return true;
}

inline bool feed_literal(Stack& s, Frame& f, uint8_t b) {
  const Node& n = *f.node;
  int32_t t = n.literal_trie.step(f.trie, b);
  if (t < 0) return false;
  f.trie = t;
  const auto& e = n.literal_trie.nodes[static_cast<size_t>(t)];
  if (e.terminal >= 0 && e.children.empty()) close(s);
  return true;
}

bool feed(Stack& s, uint8_t b, Walk* extra) {
  for (;;) {
    if (s.depth == 0) return false;  // the grammar has matched a whole text already
    if (extra->spent()) return false;
    Frame& f = s.f[s.depth - 1];
    const Node& n = *f.node;
    switch (n.kind) {
      case Node::Kind::kObject:
        return n.xml ? feed_xml_object(s, f, b, extra) : feed_json_object(s, f, b, extra);
      case Node::Kind::kArray:
        return feed_array(s, f, b, extra);
      case Node::Kind::kString:
        return feed_string(s, f, b);
      case Node::Kind::kNumber:
      case Node::Kind::kInteger:
        if (feed_number(f, b)) return true;
        break;
      case Node::Kind::kLiterals:
        if (feed_literal(s, f, b)) return true;
        break;
      case Node::Kind::kSeq:
        return push_and_feed(s, n.alts[static_cast<size_t>(f.index)], b, extra);
      case Node::Kind::kRepeat:
        if (f.state == R_ITEM) return push_and_feed(s, n.item, b, extra);
        if (f.state != R_AFTER) return false;
        if ((n.max_items < 0 || f.count < n.max_items) && !n.separator->texts.empty() &&
            static_cast<uint8_t>(n.separator->texts[0][0]) == b) {
          f.state = R_SEP;
          return push_and_feed(s, n.separator, b, extra);
        }
        break;
      case Node::Kind::kText:
        return feed_text(s, f, b, extra);
      case Node::Kind::kAnyOf:
        // Only a grammar's root starts as an anyOf frame: expand it now.
        --s.depth;
        return push_and_feed(s, &n, b, extra);
    }
    // A number, literal or repeat that can end here and did not take b:
    // it ends, and b belongs to what follows.
    if (!accepting(f)) return false;
    close(s);
  }
}

bool stack_can_end(Stack s) {
  for (;;) {
    if (s.depth == 0) return true;
    if (!accepting(s.f[s.depth - 1])) return false;
    close(s);
  }
}

int64_t stack_rest(const Stack& s) {
  if (s.depth == 0) return 0;
  int64_t r = rest_top(s.f[s.depth - 1]);
  for (int i = s.depth - 2; i >= 0; --i) {
    Frame p = s.f[i];
    if (child_done(p)) continue;  // finishing the child finishes p: nothing more
    r = add(r, rest_top(p));
  }
  return r;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  Stack s;
  s.f[0] = init(grammar_->root());
  s.depth = 1;
  stacks_.push_back(s);
}

void Matcher::copy_from(const Matcher& other) {
  grammar_ = other.grammar_;
  stacks_.resize(other.stacks_.size());
  const Walk walk{nullptr, meter_};
  for (size_t i = 0; i < stacks_.size(); ++i) copy_stack(stacks_[i], other.stacks_[i], &walk);
}

bool Matcher::advance(uint8_t b) {
  extra_.clear();
  Walk walk{&extra_, meter_};
  size_t keep = 0;
  for (size_t i = 0; i < stacks_.size(); ++i) {
    if (feed(stacks_[i], b, &walk)) {
      if (keep != i) copy_stack(stacks_[keep], stacks_[i], &walk);
      ++keep;
    }
  }
  stacks_.resize(keep);
  for (const Stack& e : extra_)
    if (stacks_.size() < kMaxStacks) copy_stack(stacks_.emplace_back(), e, &walk);
  return !stacks_.empty();
}

bool Matcher::advance(std::string_view bytes) {
  for (char c : bytes)
    if (!advance(static_cast<uint8_t>(c))) return false;
  return true;
}

bool Matcher::can_end() const {
  for (const Stack& s : stacks_)
    if (stack_can_end(s)) return true;
  return false;
}

int64_t Matcher::min_rest() const {
  int64_t best = kInf;
  for (const Stack& s : stacks_) best = std::min(best, stack_rest(s));
  return best;
}

Matcher::Plain Matcher::plain_state(int64_t* room) const {
  if (stacks_.size() != 1 || stacks_[0].depth == 0) return Plain::kNone;
  const Frame& f = stacks_[0].f[stacks_[0].depth - 1];
  const Node& n = *f.node;
  if (f.utf8_need != 0) return Plain::kNone;
  if (n.kind == Node::Kind::kString && f.state == S_BODY) {
    *room = n.max_len < 0 ? -1 : n.max_len - static_cast<int64_t>(f.used);
    return Plain::kJsonString;
  }
  if (n.kind == Node::Kind::kText && f.kmp[0] == 0 && f.kmp[1] == 0 && f.kmp[2] == 0) {
    *room = n.max_len < 0 ? -1 : n.max_len - static_cast<int64_t>(f.used);
    return Plain::kText;
  }
  return Plain::kNone;
}

}  // namespace sb::constrain
