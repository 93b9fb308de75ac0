#include "tests/engine/workload.h"

#include <algorithm>
#include <random>

namespace sb::testing {
namespace {

class Generator {
 public:
  explicit Generator(const WorkloadOptions& o) : o_(o), rng_(o.seed) {}

  std::vector<WorkloadStep> run() {
    for (int i = 0; i < o_.n_system_prompts; ++i) {
      // Long shared prefixes of 1 to 4 blocks and a ragged end.
      system_.push_back(tokens(uniform(1, 4) * o_.block_tokens + uniform(0, o_.block_tokens - 1)));
    }
    std::vector<WorkloadStep> steps;
    while (static_cast<int>(requests_) < o_.n_requests) {
      if (chance(o_.evict_probability)) {
        WorkloadStep e;
        e.kind = WorkloadStep::Kind::kEvict;
        e.evict_fraction = 0.2 + 0.8 * unit();
        e.what = "evict";
        steps.push_back(std::move(e));
      }
      steps.push_back(next_request());
      ++requests_;
    }
    return steps;
  }

 private:
  struct Conversation {
    std::vector<int32_t> prompt;
    int64_t message_boundary = -1;
    std::string name_space;
  };

  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  double unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  bool chance(double p) { return unit() < p; }
  int32_t token() { return static_cast<int32_t>(uniform(0, o_.vocab_size - 1)); }
  std::vector<int32_t> tokens(int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = token();
    return t;
  }
  const std::string& some_namespace() {
    return o_.namespaces[static_cast<size_t>(chance(0.85) ? 0 : uniform(0, static_cast<int64_t>(o_.namespaces.size()) - 1))];
  }

  WorkloadStep request(std::vector<int32_t> prompt, int64_t message_boundary, const std::string& ns,
                       std::string what) {
    WorkloadStep s;
    if (static_cast<int64_t>(prompt.size()) > o_.max_prompt_tokens) prompt.resize(static_cast<size_t>(o_.max_prompt_tokens));
    if (message_boundary >= static_cast<int64_t>(prompt.size())) message_boundary = -1;
    CompletionRequest& r = s.request;
    r.prompt = std::move(prompt);
    r.message_boundary = message_boundary;
    r.name_space = ns;
    r.max_tokens = uniform(1, o_.max_new_tokens);
    r.cache_mode = chance(o_.read_only_probability) ? CacheMode::kReadOnly : CacheMode::kDefault;
    if (chance(0.5)) {
      r.sampling.temperature = static_cast<float>(0.5 + unit());
      r.sampling.top_p = chance(0.5) ? 0.9f : 1.0f;
      // top_k = 0 sorts the whole vocabulary per token: rare, to keep the
      // suite fast.
      r.sampling.top_k = chance(0.05) ? 0 : static_cast<int>(uniform(2, 40));
      r.sampling.seed = static_cast<uint64_t>(uniform(0, 1 << 30));
    }
    r.top_logprobs = chance(0.3) ? static_cast<int>(uniform(1, 5)) : 0;
    r.echo = static_cast<int64_t>(r.prompt.size()) <= o_.echo_max_prompt_tokens && chance(o_.echo_probability);
    s.what = what + " (" + std::to_string(r.prompt.size()) + " tokens" + (ns.empty() ? "" : ", ns " + ns) + ")";
    history_.push_back({r.prompt, r.message_boundary, ns});
    return s;
  }

  WorkloadStep next_request() {
    const double roll = unit();
    if (history_.empty() || roll < 0.2) return new_conversation();
    if (roll < 0.5) return next_turn();
    if (roll < 0.62) {
      const Conversation& c = history_[static_cast<size_t>(uniform(0, static_cast<int64_t>(history_.size()) - 1))];
      return request(c.prompt, c.message_boundary, c.name_space, "replay");
    }
    return diverge();
  }

  WorkloadStep new_conversation() {
    auto prompt = system_[static_cast<size_t>(uniform(0, static_cast<int64_t>(system_.size()) - 1))];
    const auto boundary = static_cast<int64_t>(prompt.size());
    const auto user = tokens(uniform(1, o_.block_tokens + 10));
    prompt.insert(prompt.end(), user.begin(), user.end());
    const std::string& ns = some_namespace();
    auto s = request(std::move(prompt), boundary, ns, "new conversation");
    open_.push_back(history_.size() - 1);
    return s;
  }

  WorkloadStep next_turn() {
    if (open_.empty()) return new_conversation();
    const size_t pick = static_cast<size_t>(uniform(0, static_cast<int64_t>(open_.size()) - 1));
    const Conversation c = history_[open_[pick]];
    auto prompt = c.prompt;
    const auto reply = tokens(uniform(1, 30));  // stands for the assistant's reply
    prompt.insert(prompt.end(), reply.begin(), reply.end());
    const auto boundary = static_cast<int64_t>(prompt.size());
    const auto user = tokens(uniform(1, 50));
    prompt.insert(prompt.end(), user.begin(), user.end());
    if (static_cast<int64_t>(prompt.size()) > o_.max_prompt_tokens) {
      open_.erase(open_.begin() + static_cast<ptrdiff_t>(pick));
      return new_conversation();
    }
    auto s = request(std::move(prompt), boundary, c.name_space, "next turn");
    open_[pick] = history_.size() - 1;
    return s;
  }

  WorkloadStep diverge() {
    const Conversation& c = history_[static_cast<size_t>(uniform(0, static_cast<int64_t>(history_.size()) - 1))];
    const auto n = static_cast<int64_t>(c.prompt.size());
    const int64_t B = o_.block_tokens;
    const int64_t k = uniform(1, std::max<int64_t>(1, n / B));
    int64_t at = 0;
    std::string what;
    switch (uniform(0, 3)) {
      case 0: at = k * B - 1; what = "diverge at kB-1"; break;
      case 1: at = k * B; what = "diverge at kB"; break;
      case 2: at = k * B + 1; what = "diverge at kB+1"; break;
      default: at = (k - 1) * B + uniform(1, B - 2); what = "diverge inside a block"; break;
    }
    at = std::clamp<int64_t>(at, 0, n);
    std::vector<int32_t> prompt(c.prompt.begin(), c.prompt.begin() + at);
    int32_t other = token();
    if (at < n && other == c.prompt[static_cast<size_t>(at)]) other = (other + 1) % static_cast<int32_t>(o_.vocab_size);
    prompt.push_back(other);
    const auto tail = tokens(uniform(0, 2 * B));
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    return request(std::move(prompt), c.message_boundary < at ? c.message_boundary : -1, c.name_space, what);
  }

  const WorkloadOptions o_;
  std::mt19937_64 rng_;
  std::vector<std::vector<int32_t>> system_;
  std::vector<Conversation> history_;
  std::vector<size_t> open_;  // indices into history_ of conversations that may grow
  int requests_ = 0;
};

}  // namespace

std::vector<WorkloadStep> make_workload(const WorkloadOptions& options) { return Generator(options).run(); }

}  // namespace sb::testing
