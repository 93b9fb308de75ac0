#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "bank/bank.h"
#include "bank/chain.h"
#include "bank/compose.h"
#include "bank/key.h"
#include "model/model.h"
#include "runtime/sampling.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The engine's chat knowledge, translated into the bank's retention classes.
Retention retention_of(SnapshotReason r) {
  switch (r) {
    case SnapshotReason::kInterval: return Retention::kThinFirst;
    // Where a request ended: a replay of it restores here.
    case SnapshotReason::kPromptEnd: return Retention::kKeep;
    // A message boundary and a branch point are where conversations part:
    // later requests restore from them.
    case SnapshotReason::kBranch: return Retention::kAnchor;
    case SnapshotReason::kMessage: return Retention::kAnchor;
  }
  return Retention::kThinFirst;
}

// The `k` best alternatives of a log-probability row, best first, ties to
// the lower id.
std::vector<TokenLogprob> top_alternatives(const std::vector<float>& lp, int k) {
  std::vector<TokenLogprob> out;
  if (k <= 0) return out;
  std::vector<int32_t> ids(lp.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t keep = std::min(static_cast<size_t>(k), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(keep), ids.end(),
                    [&](int32_t a, int32_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
  for (size_t i = 0; i < keep; ++i) out.push_back({ids[i], lp[static_cast<size_t>(ids[i])]});
  return out;
}

Status validate(const CompletionRequest& r, int64_t vocab) {
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
  return Status::ok();
}

}  // namespace

Status Engine::create(const Model& model, Bank* bank, const EngineOptions& options, std::unique_ptr<Engine>* out) {
  const int64_t B = options.block_tokens;
  if (B <= 0 || B % kGrid != 0)
    return Status::invalid("block tokens (" + std::to_string(B) + ") must be a positive multiple of " +
                           std::to_string(kGrid));
  if (B % model.schema().pooled_lcm() != 0)
    return Status::invalid("block tokens (" + std::to_string(B) + ") must be a multiple of " +
                           std::to_string(model.schema().pooled_lcm()) + " for this model");
  if (options.snapshot_every < 0 || options.snapshot_every % B != 0)
    return Status::invalid("snapshot interval (" + std::to_string(options.snapshot_every) +
                           ") must be a multiple of the block tokens (" + std::to_string(B) + ")");
  out->reset(new Engine(model, bank, options));
  return Status::ok();
}

Key Engine::namespace_root(const std::string& name_space) const {
  return root_key(kBankFormatVersion, model_.fingerprint(), name_space, options_.block_tokens);
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.requests = counters_.requests.load();
  s.prompt_tokens = counters_.prompt_tokens.load();
  s.cached_tokens = counters_.cached_tokens.load();
  for (size_t i = 0; i < RestoreMode::kCount; ++i) s.restores[i] = counters_.by_mode[i].load();
  s.check_failures = counters_.check_failures.load();
  return s;
}

Status Engine::complete(const CompletionRequest& req, CompletionResult* out) const {
  const auto t_start = Clock::now();
  SB_RETURN_IF_ERROR(validate(req, model_.vocab_size()));
  const StateSchema& schema = model_.schema();
  const auto n = static_cast<int64_t>(req.prompt.size());
  const int64_t B = options_.block_tokens;
  const std::span<const int32_t> prompt(req.prompt);
  const bool use_bank = bank_ != nullptr && req.cache_mode != CacheMode::kBypass;
  const bool publish = use_bank && req.cache_mode == CacheMode::kDefault;

  CompletionResult res;
  RestoreRecord& rec = res.restore;
  rec.mode = use_bank ? RestoreMode::cold() : RestoreMode::bypass();
  rec.miss_reason = !use_bank ? MissReason::kBypass : req.echo ? MissReason::kEcho : MissReason::kNone;
  State state = model_.new_state();
  std::vector<Key> keys;

  // Plan, then apply: nothing live exists until the plan passed every check.
  if (use_bank) {
    const auto t_lookup = Clock::now();
    keys = chain_keys(namespace_root(req.name_space), prompt, options_.block_tokens, n / B);
    if (!req.echo) {
      const int64_t m = (n - 1) / B;
      std::vector<Key> shared;
      if (!req.shared_name_space.empty())
        shared = chain_keys(root_key(kBankFormatVersion, model_.fingerprint(), req.shared_name_space,
                                     options_.block_tokens),
                            prompt, options_.block_tokens, m);
      RestorePlan plan;
      SB_RETURN_IF_ERROR(bank_->plan_restore(schema, std::span<const Key>(keys).first(static_cast<size_t>(m) + 1),
                                             prompt, options_.block_tokens, &plan, shared));
      rec.lookup_ms = ms_since(t_lookup);
      const auto t_restore = Clock::now();
      rec.matched_tokens = plan.matched_tokens;
      rec.checks = plan.checks;
      rec.check_failures = plan.check_failures;
      rec.miss_reason = plan.miss_reason;
      rec.diverged_at = plan.diverged_at;
      rec.stored_in_other_namespace = plan.stored_in_other_namespace;
      // Nothing is stored, and this request (or this bank) stores nothing.
      if (rec.miss_reason == MissReason::kNoEntry && (req.cache_mode == CacheMode::kReadOnly || !bank_->writable()))
        rec.miss_reason = MissReason::kReadOnly;
      if (plan.restore_point > 0) {
        std::vector<ObjectId> used;
        for (const auto& b : plan.blocks) used.push_back(ObjectId{ObjectKind::kBlock, b->key});
        if (plan.snapshot) used.push_back(ObjectId{ObjectKind::kSnapshot, plan.snapshot->key});
        State restored;
        Status composed = compose_state(schema, plan.blocks, plan.snapshot, &restored);
        // The model's own check: derived components (pooled index rows) must
        // equal what the restored raw rows give.
        if (composed.is_ok()) composed = model_.verify_state(restored);
        ++rec.checks;
        if (composed.is_ok()) {
          if (hooks_.tamper_restored_state) hooks_.tamper_restored_state(restored);
          res.restored_objects = used;
          res.restored_chain.assign(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(plan.blocks.size()) + 1);
          state = std::move(restored);
          rec.mode = plan.mode();
          rec.restore_point = plan.restore_point;
          rec.common_prefix_tokens = plan.common_prefix_tokens;
          rec.snapshot_position = plan.snapshot_position;
          rec.blocks = static_cast<int64_t>(plan.blocks.size());
          rec.bytes_read = plan.bytes_read;
          rec.tiers = plan.tier_uses();
        } else {
          // Which object is wrong is not known here: take them all out, so
          // this request (cold from here) publishes them again.
          ++rec.check_failures;
          bank_->quarantine(used, "the restored state failed its check: " + composed.message());
          rec.miss_reason = MissReason::kCheckFailed;
          rec.diverged_at = -1;
        }
      }
      rec.restore_ms = ms_since(t_restore);
    } else {
      rec.lookup_ms = ms_since(t_lookup);
    }
  }

  // Prefill the rest from the restore point: B is a multiple of kGrid, so the
  // call starts on the same absolute grid as a cold prefill.
  const int64_t start = state.position();
  if (start >= (n - 1) / B * B) {  // the whole usable prefix, or none to use: no miss
    rec.miss_reason = MissReason::kNone;
    rec.diverged_at = -1;
    rec.stored_in_other_namespace = false;
  }
  std::vector<SnapshotPlace> places;
  PrefillOptions options;
  options.all_logits = req.echo;
  if (publish && schema.has_recurrent()) {
    // Stored blocks beyond the restore point mean another conversation shared
    // this prefix and went on differently; a snapshot where they end lets the
    // next conversation that shares it restore that far.
    const int64_t branch_point = rec.matched_tokens > start ? rec.matched_tokens : 0;
    for (const auto& p : snapshot_positions(n, req.message_boundary, B, options_.snapshot_every, branch_point))
      if (p.position > start) {
        places.push_back(p);
        options.capture_positions.push_back(p.position);
      }
  }
  const auto t_prefill = Clock::now();
  PrefillOutput prefilled;
  SB_RETURN_IF_ERROR(model_.prefill(state, prompt.subspan(static_cast<size_t>(start)), options, &prefilled));
  rec.prefill_ms = ms_since(t_prefill);
  rec.prefill_tokens = n - start;

  const int64_t vocab = model_.vocab_size();
  if (req.echo) {
    res.prompt_logprobs.assign(static_cast<size_t>(n), 0.0f);
    for (int64_t i = 1; i < n; ++i) {
      const auto row = std::span<const float>(prefilled.logits).subspan(static_cast<size_t>((i - 1) * vocab),
                                                                       static_cast<size_t>(vocab));
      res.prompt_logprobs[static_cast<size_t>(i)] = log_softmax(row)[static_cast<size_t>(req.prompt[i])];
    }
  }

  // Publishing copies the new rows out of the live State, so it runs before
  // the first decode step appends to it, but after the first token is
  // sampled so that it does not count against time to first token.
  bool published = !publish;
  auto publish_new_state = [&]() {
    if (published) return;
    published = true;
    // Each new full block, then the snapshot at its end when one was taken.
    size_t next_snap = 0;
    for (int64_t j = start / B; j < n / B; ++j) {
      const auto tokens = prompt.subspan(static_cast<size_t>(j * B), static_cast<size_t>(B));
      (void)bank_->publish(make_block(state, keys[j + 1], keys[j], j * B, tokens), Retention::kBlock);
      const int64_t end = (j + 1) * B;
      while (next_snap < prefilled.snapshots.size() && prefilled.snapshots[next_snap].position < end) ++next_snap;
      if (next_snap < prefilled.snapshots.size() && prefilled.snapshots[next_snap].position == end) {
        const auto it = std::find_if(places.begin(), places.end(), [&](const SnapshotPlace& p) { return p.position == end; });
        if (it != places.end())
          (void)bank_->publish(make_snapshot(prefilled.snapshots[next_snap], keys[j + 1]), retention_of(it->reason));
      }
    }
  };

  std::vector<float> logits(prefilled.logits.end() - vocab, prefilled.logits.end());
  Sampler sampler(SamplerConfig{req.sampling.temperature, req.sampling.top_p, req.sampling.top_k, req.sampling.seed,
                                req.sampling.min_p});
  std::unique_ptr<LogitsProcessor> processor = req.make_processor ? req.make_processor() : nullptr;
  std::vector<float> processed;
  res.finish_reason = "length";
  for (int64_t i = 0; i < req.max_tokens; ++i) {
    if (i > 0) SB_RETURN_IF_ERROR(model_.decode(state, res.tokens.back().token, &logits));
    GeneratedToken g;
    if (processor) {
      processed = logits;
      SB_RETURN_IF_ERROR(processor->process(processed, req.max_tokens - i));
      g.token = sampler.sample(processed);
      SB_RETURN_IF_ERROR(processor->accept(g.token));
    } else {
      g.token = sampler.sample(logits);
    }
    const std::vector<float> lp = log_softmax(logits);
    g.logprob = lp[static_cast<size_t>(g.token)];
    g.top = top_alternatives(lp, req.top_logprobs);
    if (i == 0) {
      res.ttft_ms = ms_since(t_start);
      publish_new_state();
    }
    res.tokens.push_back(g);
    if (req.on_token && !req.on_token(g)) {
      res.finish_reason = "cancelled";
      break;
    }
    if (std::find(req.stop_tokens.begin(), req.stop_tokens.end(), g.token) != req.stop_tokens.end()) {
      res.finish_reason = "stop";
      break;
    }
  }
  if (req.max_tokens == 0) {
    res.ttft_ms = ms_since(t_start);
    publish_new_state();
  }

  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  counters_.prompt_tokens.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  counters_.cached_tokens.fetch_add(static_cast<uint64_t>(rec.restore_point), std::memory_order_relaxed);
  counters_.check_failures.fetch_add(static_cast<uint64_t>(rec.check_failures), std::memory_order_relaxed);
  counters_.by_mode[rec.mode.index()].fetch_add(1, std::memory_order_relaxed);
  *out = std::move(res);
  return Status::ok();
}

}  // namespace sb
