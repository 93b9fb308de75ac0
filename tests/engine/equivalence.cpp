#include "tests/engine/equivalence.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace sb::testing {
namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

std::string HarnessReport::summary() const {
  std::string s = std::to_string(requests) + " requests, " + std::to_string(restored) + " restored (" +
                  std::to_string(restored_tokens) + " tokens), " + std::to_string(evictions) + " eviction steps, " +
                  std::to_string(mismatches) + " mismatches, " + std::to_string(errors) + " errors";
  for (const auto& f : failures) s += "\n  " + f;
  return s;
}

std::string compare_results(const CompletionResult& a, const CompletionResult& b) {
  if (a.tokens.size() != b.tokens.size())
    return "generated " + std::to_string(a.tokens.size()) + " tokens, bypass " + std::to_string(b.tokens.size());
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    const auto& x = a.tokens[i];
    const auto& y = b.tokens[i];
    if (x.token != y.token)
      return "token " + std::to_string(i) + " is " + std::to_string(x.token) + ", bypass " + std::to_string(y.token);
    if (!same_bits(x.logprob, y.logprob))
      return "logprob " + std::to_string(i) + " differs in its bits (" + std::to_string(x.logprob) + ")";
    if (x.top.size() != y.top.size()) return "top alternatives " + std::to_string(i) + " differ in number";
    for (size_t j = 0; j < x.top.size(); ++j)
      if (x.top[j].token != y.top[j].token || !same_bits(x.top[j].logprob, y.top[j].logprob))
        return "top alternative " + std::to_string(j) + " of token " + std::to_string(i) + " differs";
  }
  if (a.prompt_logprobs.size() != b.prompt_logprobs.size()) return "echo logprobs differ in number";
  for (size_t i = 0; i < a.prompt_logprobs.size(); ++i)
    if (!same_bits(a.prompt_logprobs[i], b.prompt_logprobs[i])) return "echo logprob " + std::to_string(i) + " differs";
  if (a.finish_reason != b.finish_reason) return std::string("finish reason ") + finish_reason_name(a.finish_reason) + ", bypass " + finish_reason_name(b.finish_reason);
  return "";
}

HarnessReport run_equivalence(const Engine& engine, const std::vector<WorkloadStep>& steps,
                              const std::function<void(double)>& evict) {
  HarnessReport report;
  const int64_t B = engine.options().block_tokens;
  auto fail = [&](const WorkloadStep& step, int index, const std::string& why) {
    ++report.mismatches;
    if (report.failures.size() < 8)
      report.failures.push_back("step " + std::to_string(index) + " [" + step.what + "]: " + why);
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    const WorkloadStep& step = steps[i];
    if (step.kind == WorkloadStep::Kind::kEvict) {
      if (evict) evict(step.evict_fraction);
      ++report.evictions;
      continue;
    }
    ++report.requests;
    CompletionResult served, bypass;
    CompletionRequest cold = step.request;
    cold.cache_mode = CacheMode::kBypass;
    const Status s1 = engine.complete(step.request, &served);
    const Status s2 = engine.complete(cold, &bypass);
    if (!s1.is_ok() || !s2.is_ok()) {
      ++report.errors;
      if (report.failures.size() < 8)
        report.failures.push_back("step " + std::to_string(i) + " [" + step.what + "]: " + s1.to_string() + " / " +
                                  s2.to_string());
      continue;
    }
    const RestoreRecord& r = served.restore;
    const auto n = static_cast<int64_t>(step.request.prompt.size());
    if (r.restore_point > 0) {
      ++report.restored;
      report.restored_tokens += r.restore_point;
    }
    std::string why = compare_results(served, bypass);
    if (why.empty() && r.restore_point > r.common_prefix_tokens)
      why = "restore_point " + std::to_string(r.restore_point) + " > common_prefix_tokens " +
            std::to_string(r.common_prefix_tokens);
    if (why.empty() && (r.restore_point % B != 0 || r.restore_point >= n || r.prefill_tokens != n - r.restore_point))
      why = "restore record out of shape: restore_point " + std::to_string(r.restore_point) + ", prefill_tokens " +
            std::to_string(r.prefill_tokens) + ", prompt " + std::to_string(n);
    if (why.empty() && bypass.restore.mode != RestoreMode::bypass())
      why = std::string("bypass reported mode ") + bypass.restore.mode.name();
    if (!why.empty()) fail(step, static_cast<int>(i), why + " (mode " + r.mode.name() + ", restore_point " +
                                                        std::to_string(r.restore_point) + ")");
  }
  return report;
}

EngineStack::EngineStack(const Model& model, BankOptions bank_options, uint32_t block_tokens,
                         int64_t snapshot_every) {
  bank_options.schema = model.schema();
  bank_options.log = [](const std::string&) {};
  Status s = TieredBank::open(std::move(bank_options), &tiers);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (!s.is_ok()) return;
  bank = tiers->bank();
  EngineOptions options;
  options.block_tokens = block_tokens;
  options.snapshot_every = snapshot_every;
  s = Engine::create(model, bank, options, &engine);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

EngineStack::~EngineStack() { engine.reset(); }

namespace {

uint64_t harness_budget(const Model& model, uint32_t block_tokens, int blocks) {
  return static_cast<uint64_t>(blocks) *
         (model.schema().block_bytes(block_tokens) + model.schema().snapshot_bytes() + block_tokens * sizeof(int32_t));
}

BankOptions ram_only(uint64_t budget) {
  BankOptions o;
  o.ram_bytes = budget;
  return o;
}

}  // namespace

HarnessBank::HarnessBank(const Model& model, uint32_t block_tokens, int64_t snapshot_every, int blocks)
    : budget(harness_budget(model, block_tokens, blocks)),
      stack(model, ram_only(budget), block_tokens, snapshot_every),
      ram(stack.tiers ? stack.tiers->ram() : nullptr),
      engine(stack.engine.get()) {
  if (ram == nullptr || engine == nullptr) std::abort();
}

HarnessReport HarnessBank::run(const std::vector<WorkloadStep>& steps) {
  RamTier* r = ram;
  const uint64_t b = budget;
  return run_equivalence(*engine, steps, [r, b](double fraction) {
    r->set_budget(static_cast<uint64_t>(static_cast<double>(r->stats().bytes) * (1.0 - fraction)));
    r->set_budget(b);
  });
}

}  // namespace sb::testing
