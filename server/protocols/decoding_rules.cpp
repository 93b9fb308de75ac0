#include "server/protocols/decoding_rules.h"

#include <unordered_map>
#include <unordered_set>

namespace sb {

namespace {

class RulesProcessor : public LogitsProcessor {
 public:
  explicit RulesProcessor(std::shared_ptr<const DecodingRules> rules) : rules_(std::move(rules)) {
    if (rules_->repetition_penalty != 1.0f) seen_.insert(rules_->prompt.begin(), rules_->prompt.end());
    if (rules_->grammar) constraint_ = std::make_unique<constrain::Constraint>(rules_->vocabulary, rules_->grammar);
  }

  bool prepares() const override { return constraint_ != nullptr; }

  Status prepare(int64_t tokens_left, const std::function<bool()>& interrupted) override {
    return constraint_ ? constraint_->prepare(tokens_left, interrupted) : Status::ok();
  }

  Status process(std::span<float> logits, int64_t tokens_left, const std::function<bool()>& interrupted) override {
    const auto in_range = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < logits.size(); };
    for (const auto& [id, bias] : rules_->logit_bias)
      if (in_range(id)) logits[static_cast<size_t>(id)] += bias;
    if (rules_->repetition_penalty != 1.0f) {
      const float r = rules_->repetition_penalty;
      for (int32_t id : seen_) {
        if (!in_range(id)) continue;
        float& l = logits[static_cast<size_t>(id)];
        l = l > 0.0f ? l / r : l * r;
      }
    }
    if (rules_->presence_penalty != 0.0f || rules_->frequency_penalty != 0.0f) {
      for (const auto& [id, count] : counts_) {
        if (!in_range(id)) continue;
        logits[static_cast<size_t>(id)] -= rules_->presence_penalty + rules_->frequency_penalty * static_cast<float>(count);
      }
    }
    if (!constraint_) return Status::ok();
    if (!constraint_->prepared()) SB_RETURN_IF_ERROR(constraint_->prepare(tokens_left, interrupted));
    constraint_->apply(logits);
    return Status::ok();
  }

  Status accept(int32_t token) override {
    ++counts_[token];
    if (rules_->repetition_penalty != 1.0f) seen_.insert(token);
    return constraint_ ? constraint_->accept(token) : Status::ok();
  }

 private:
  std::shared_ptr<const DecodingRules> rules_;
  std::unordered_map<int32_t, int64_t> counts_;
  std::unordered_set<int32_t> seen_;
  std::unique_ptr<constrain::Constraint> constraint_;
};

}  // namespace

std::unique_ptr<LogitsProcessor> DecodingRules::make() const {
  return std::make_unique<RulesProcessor>(std::make_shared<const DecodingRules>(*this));
}

}  // namespace sb
