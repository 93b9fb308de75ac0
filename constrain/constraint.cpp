#include "constrain/constraint.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sb::constrain {

namespace {

// UTF-16 units of `s` when it is complete, valid UTF-8; -1 otherwise.
int32_t complete_utf8(const std::string& s) {
  int32_t cps = 0;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return -1;
    if (i + len > s.size()) return -1;
    for (size_t k = 1; k < len; ++k) {
      const auto d = static_cast<uint8_t>(s[i + k]);
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return -1;
    }
    i += len;
    cps += len == 4 ? 2 : 1;
  }
  return cps;
}

Status over_budget(uint64_t limit) {
  return Status::exhausted("the output grammar needs more than " + std::to_string(limit) +
                           " matcher steps for one token (simplify the schema)");
}

}  // namespace

Vocabulary::Vocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> stop_tokens)
    : bytes_(std::move(token_bytes)), stops_(std::move(stop_tokens)) {
  plain_kind_.assign(bytes_.size(), 0);
  utf16_units_.assign(bytes_.size(), -1);
  by_two_.resize(256 * 256);
  group_plain_.assign(256 * 256, 3);
  for (size_t id = 0; id < bytes_.size(); ++id) {
    const std::string& b = bytes_[id];
    if (b.empty()) continue;
    if (b.size() == 1) single_[static_cast<uint8_t>(b[0])].push_back(static_cast<int32_t>(id));
    else by_two_[static_cast<uint8_t>(b[0]) * 256u + static_cast<uint8_t>(b[1])].push_back(static_cast<int32_t>(id));
    int32_t cps = complete_utf8(b);
    if (cps < 0) continue;
    bool json = true, text = true;
    for (char ch : b) {
      const auto c = static_cast<uint8_t>(ch);
      if (c < 0x20 || c == '"' || c == '\\') json = false;
      if ((c < 0x20 && c != '\t' && c != '\r') || c == '\n' || c == '<') text = false;
    }
    utf16_units_[id] = cps;
    if (json) {
      plain_kind_[id] |= 1;
      json_plain_.push_back(static_cast<int32_t>(id));
    }
    if (text) {
      plain_kind_[id] |= 2;
      text_plain_.push_back(static_cast<int32_t>(id));
    }
  }
  for (size_t g = 0; g < by_two_.size(); ++g)
    for (int32_t id : by_two_[g]) group_plain_[g] &= plain_kind_[static_cast<size_t>(id)];
}

Constraint::Constraint(std::shared_ptr<const Vocabulary> vocabulary, std::shared_ptr<const Grammar> grammar,
                       uint64_t max_work)
    : vocab_(std::move(vocabulary)),
      grammar_(grammar),
      matcher_(grammar),
      first_(grammar),
      second_(grammar),
      scratch_(grammar) {
  for (Matcher* m : {&matcher_, &first_, &second_, &scratch_}) m->set_meter(&meter_);
  meter_.limit = max_work;
}

bool Constraint::allowed_after(const Matcher& m, int64_t tokens_left, bool budget) const {
  // After this token, tokens_left - 1 remain for the rest and the stop token.
  return !budget || m.min_rest() + 1 <= tokens_left - 1;
}

Status Constraint::fill(int64_t tokens_left, bool budget, const std::function<bool()>& interrupted, size_t* count) {
  std::fill(allowed_.begin(), allowed_.end(), 0);
  size_t n = 0;
  auto allow = [&](int32_t id) {
    if (!allowed_[static_cast<size_t>(id)]) {
      allowed_[static_cast<size_t>(id)] = 1;
      ++n;
    }
  };
  int64_t room = -1;
  const Matcher::Plain plain = matcher_.plain_state(&room);
  const uint8_t plain_bit = plain == Matcher::Plain::kJsonString ? 1 : plain == Matcher::Plain::kText ? 2 : 0;
  if (plain_bit && allowed_after(matcher_, tokens_left, budget)) {
    // A plain token leaves the state as it is, with more code points: the
    // rest can only shrink, so the check above covers every one of them.
    for (int32_t id : plain_bit == 1 ? vocab_->json_plain_ : vocab_->text_plain_)
      if (room < 0 || vocab_->utf16_units_[static_cast<size_t>(id)] <= room) allow(id);
  }
  auto skip = [&](int32_t id) { return plain_bit && (vocab_->plain_kind_[static_cast<size_t>(id)] & plain_bit); };
  for (unsigned b0 = 0; b0 < 256; ++b0) {
    if (interrupted && interrupted()) return Status::cancelled("cancelled while masking the constrained output");
    if (meter_.over())
      return over_budget(meter_.limit);
    first_.copy_from(matcher_);
    if (!first_.advance(static_cast<uint8_t>(b0))) continue;
    for (int32_t id : vocab_->single_[b0])
      if (!skip(id) && allowed_after(first_, tokens_left, budget)) allow(id);
    for (unsigned b1 = 0; b1 < 256; ++b1) {
      const size_t g = b0 * 256 + b1;
      const auto& group = vocab_->by_two_[g];
      if (group.empty() || (plain_bit && (vocab_->group_plain_[g] & plain_bit))) continue;
      second_.copy_from(first_);
      if (!second_.advance(static_cast<uint8_t>(b1))) continue;
      for (int32_t id : group) {
        if (skip(id)) continue;
        const std::string& bytes = vocab_->bytes_[static_cast<size_t>(id)];
        scratch_.copy_from(second_);
        if (scratch_.advance(std::string_view(bytes).substr(2)) && allowed_after(scratch_, tokens_left, budget)) allow(id);
      }
    }
  }
  if (meter_.over())
    return over_budget(meter_.limit);
  *count = n;
  return Status::ok();
}

Status Constraint::mask(std::span<float> logits, int64_t tokens_left, const std::function<bool()>& interrupted) {
  SB_RETURN_IF_ERROR(prepare(tokens_left, interrupted));
  apply(logits);
  return Status::ok();
}

Status Constraint::prepare(int64_t tokens_left, const std::function<bool()>& interrupted) {
  prepared_ = false;
  allowed_.resize(vocab_->size());
  meter_.used = 0;
  size_t n = 0;
  SB_RETURN_IF_ERROR(fill(tokens_left, true, interrupted, &n));
  const bool done = matcher_.can_end();
  // A budget too small for any complete output: keep the output valid as
  // far as it goes (max_tokens ends it).
  if (n == 0 && !done) SB_RETURN_IF_ERROR(fill(tokens_left, false, interrupted, &n));
  // Stop tokens once the output is complete (or, should nothing be left, to end it).
  if (done || n == 0)
    for (int32_t s : vocab_->stops_)
      if (s >= 0 && static_cast<size_t>(s) < allowed_.size()) allowed_[static_cast<size_t>(s)] = 1;
  prepared_ = true;
  return Status::ok();
}

void Constraint::apply(std::span<float> logits) const {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i)
    if (i >= allowed_.size() || !allowed_[i]) logits[i] = kMasked;
}

Status Constraint::accept(int32_t token) {
  if (finished_) return Status::invalid("the constrained output has already ended");
  prepared_ = false;
  if (std::find(vocab_->stops_.begin(), vocab_->stops_.end(), token) != vocab_->stops_.end()) {
    finished_ = true;
    return Status::ok();
  }
  meter_.used = 0;
  if (token < 0 || static_cast<size_t>(token) >= vocab_->size() || vocab_->bytes_[static_cast<size_t>(token)].empty() ||
      !matcher_.advance(vocab_->bytes_[static_cast<size_t>(token)]))
    return meter_.over() ? over_budget(meter_.limit)
                         : Status::invalid("token " + std::to_string(token) + " does not continue the constrained output");
  return Status::ok();
}

}  // namespace sb::constrain
