// StopMatcher: finds OpenAI `stop` strings in generated text as it streams.
//
// Text that could still be the start of a stop string is held back until it
// is decided, so a stream never shows text that the final response cuts
// off. Invariant: the concatenation of everything push() and finish()
// return equals the generated text up to (not including) the first stop
// string, or all of it when none occurs. One request's object; not shared.
#pragma once

#include <string>
#include <vector>

namespace sb {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Returns the text now safe to emit. Once stopped(), input is ignored.
  std::string push(const std::string& text) {
    if (stopped_) return {};
    held_ += text;
    size_t cut = std::string::npos;
    const std::string* first = nullptr;
    for (const auto& s : stops_) {
      size_t at = held_.find(s);
      if (at != std::string::npos && at < cut) {
        cut = at;
        first = &s;
      }
    }
    if (cut != std::string::npos) {
      stopped_ = true;
      matched_ = *first;
      std::string out = held_.substr(0, cut);
      held_.clear();
      return out;
    }
    // Keep the longest tail of held_ that is a proper prefix of a stop string.
    size_t keep = 0;
    for (const auto& s : stops_) {
      for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
        if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
          keep = n;
          break;
        }
      }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }

  std::string finish() {
    std::string out;
    if (!stopped_) out.swap(held_);
    return out;
  }

  bool stopped() const { return stopped_; }
  // The stop string that ended the text (the earliest in it; of two at the
  // same place, the first given). Empty until stopped().
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;  // non-empty strings
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace sb
