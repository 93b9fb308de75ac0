#include "engine/engine.h"

#include <condition_variable>
#include <mutex>

#include "bank/bank.h"
#include "bank/chain.h"
#include "engine/admission.h"
#include "engine/sequence.h"
#include "engine/step_budget.h"
#include "engine/step_loop.h"
#include "model/model.h"

namespace sb {

double ms_since(EngineClock::time_point t) {
  return std::chrono::duration<double, std::milli>(EngineClock::now() - t).count();
}

namespace {

Status validate(const CompletionRequest& r, int64_t vocab, bool has_mtp) {
  if (r.prompt.empty()) return Status::invalid("the prompt is empty");
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab)
      return Status::invalid("prompt token " + std::to_string(i) + " is " + std::to_string(r.prompt[i]) +
                             ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
  if (r.max_tokens < 0) return Status::invalid("max_tokens is negative");
  if (r.top_logprobs < 0 || r.top_logprobs > 20) return Status::invalid("top_logprobs must be in 0..20");
  if (!(r.sampling.top_p > 0.0f && r.sampling.top_p <= 1.0f)) return Status::invalid("top_p must be in (0, 1]");
  if (r.sampling.top_k < 0) return Status::invalid("top_k is negative");
  if (!(r.sampling.min_p >= 0.0f && r.sampling.min_p <= 1.0f)) return Status::invalid("min_p must be in [0, 1]");
  return check_speculative(r.speculative.mode.value_or(SpeculativeMode::kOff), r.speculative.draft_max.value_or(1),
                           has_mtp);
}

// The checkpoint's own rule on top of EngineOptions::validate().
Status check_options(const Model& model, const EngineOptions& options) {
  SB_RETURN_IF_ERROR(options.validate());
  const int64_t B = options.block_tokens;
  if (B % model.schema().pooled_lcm() != 0)
    return Status::invalid("--block-tokens (" + std::to_string(B) + ") must be a multiple of " +
                           std::to_string(model.schema().pooled_lcm()) + " for this model");
  return check_speculative(options.speculative, options.draft_max, model.has_mtp());
}

}  // namespace

Status EngineOptions::validate() const {
  const int64_t B = block_tokens;
  if (B <= 0 || B % kGrid != 0)
    return Status::invalid("--block-tokens (" + std::to_string(B) + ") must be a positive multiple of " +
                           std::to_string(kGrid));
  if (snapshot_every < 0 || snapshot_every % B != 0)
    return Status::invalid("--snapshot-every (" + std::to_string(snapshot_every) +
                           ") must be a multiple of --block-tokens (" + std::to_string(B) + ")");
  if (max_running < 1) return Status::invalid("--max-running must be at least 1");
  if (batch_tokens <= max_running)
    return Status::invalid("--batch-tokens (" + std::to_string(batch_tokens) + ") must be more than --max-running (" +
                           std::to_string(max_running) + "), so that a prefill moves beside every running decode");
  if (!StepBudget::valid_ratio(itl_ratio))
    return Status::invalid(std::string("--itl-ratio must be ") + StepBudget::kRatioRule);
  if (max_queue < 1) return Status::invalid("--max-queue must be at least 1");
  if (!(tenant_share > 0.0 && tenant_share <= 1.0))
    return Status::invalid("--tenant-share must be a fraction in (0, 1]");
  if (restore_threads < 1) return Status::invalid("restore threads must be at least 1");
  return check_speculative(speculative, draft_max);
}

Status Engine::create(const Model& model, Bank* bank, const EngineOptions& options, std::unique_ptr<Engine>* out) {
  SB_RETURN_IF_ERROR(check_options(model, options));
  std::unique_ptr<Engine> engine(new Engine());
  engine->context_.reset(new EngineContext{model, bank, options, {}});
  engine->loop_ = std::make_unique<StepLoop>(*engine->context_);
  const Engine* self = engine.get();
  engine->admission_ = std::make_unique<Admission>(
      AdmissionLimits{options.max_running, options.max_queue, options.tenant_share, options.restore_threads},
      [self](const std::shared_ptr<Ticket>& ticket) { self->start(ticket); });
  *out = std::move(engine);
  return Status::ok();
}

Engine::~Engine() = default;

const EngineOptions& Engine::options() const { return context_->options; }
const Model& Engine::model() const { return context_->model; }
Bank* Engine::bank() const { return context_->bank; }
Key Engine::namespace_root(const std::string& name_space) const {
  return root_key(kBankFormatVersion, context_->model.fingerprint(), name_space, context_->options.block_tokens);
}

Admission& Engine::admission() const { return *admission_; }

Status Engine::check(const CompletionRequest& request) const {
  return validate(request, context_->model.vocab_size(), context_->model.has_mtp());
}

Admit Engine::submit(CompletionRequest request, CompletionDone on_done, std::string tenant) const {
  if (!check(request)) return Admit::kInvalid;
  return admission_->submit(std::move(request), std::move(on_done), std::move(tenant));
}

Status Engine::complete(const CompletionRequest& request, CompletionResult* out) const {
  SB_RETURN_IF_ERROR(check(request));
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  const Admit admit = admission_->submit(
      request,
      [&](Status s, CompletionResult result) {
        // Notified under the lock: the waiter's stack holds mu and cv.
        std::lock_guard<std::mutex> lock(mu);
        status = std::move(s);
        if (status) *out = std::move(result);
        done = true;
        cv.notify_all();
      },
      "", /*bounded=*/false);
  if (admit != Admit::kOk) return Status::unsupported("the engine is closed to new requests");
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return status;
}

void Engine::start(const std::shared_ptr<Ticket>& ticket) const {
  auto seq = std::make_unique<Sequence>(ticket->request, ticket->submitted);
  Status s = restore_prefix(*context_, *seq);
  if (!s) return admission_->finish(*ticket, std::move(s), CompletionResult{});
  seq->on_retired = [this, ticket](Sequence& done) {
    if (done.status) count(done.request, done.result);
    admission_->finish(*ticket, done.status, std::move(done.result));
  };
  loop_->start(std::move(seq));
}

void Engine::count(const CompletionRequest& request, const CompletionResult& result) const {
  const RestoreRecord& rec = result.restore;
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  counters_.prompt_tokens.fetch_add(request.prompt.size(), std::memory_order_relaxed);
  counters_.cached_tokens.fetch_add(static_cast<uint64_t>(rec.restore_point), std::memory_order_relaxed);
  counters_.check_failures.fetch_add(static_cast<uint64_t>(rec.check_failures), std::memory_order_relaxed);
  counters_.by_mode[rec.mode.index()].fetch_add(1, std::memory_order_relaxed);
  const SpeculativeRecord& spec = result.speculative;
  counters_.spec_steps.fetch_add(static_cast<uint64_t>(spec.steps), std::memory_order_relaxed);
  counters_.spec_tokens.fetch_add(static_cast<uint64_t>(spec.tokens), std::memory_order_relaxed);
  counters_.spec_drafted.fetch_add(static_cast<uint64_t>(spec.drafted), std::memory_order_relaxed);
  counters_.spec_accepted.fetch_add(static_cast<uint64_t>(spec.accepted), std::memory_order_relaxed);
  counters_.spec_switched_off.fetch_add(static_cast<uint64_t>(spec.switched_off), std::memory_order_relaxed);
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.requests = counters_.requests.load();
  s.prompt_tokens = counters_.prompt_tokens.load();
  s.cached_tokens = counters_.cached_tokens.load();
  for (size_t i = 0; i < RestoreMode::kCount; ++i) s.restores[i] = counters_.by_mode[i].load();
  s.check_failures = counters_.check_failures.load();
  loop_->add_stats(&s);
  s.spec_decode_steps = counters_.spec_steps.load();
  s.spec_decode_tokens = counters_.spec_tokens.load();
  s.spec_drafted = counters_.spec_drafted.load();
  s.spec_accepted = counters_.spec_accepted.load();
  s.spec_switched_off = counters_.spec_switched_off.load();
  return s;
}

}  // namespace sb
