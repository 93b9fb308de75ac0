// Restore: the longest stored prefix of the prompt, planned by the bank and
// composed into a fresh State, on the caller's thread before the request
// joins the step loop (plan, then apply: nothing live exists until the plan
// passed every check).
#include <algorithm>

#include "bank/bank.h"
#include "bank/chain.h"
#include "bank/compose.h"
#include "engine/sequence.h"

namespace sb {
namespace {

// Where the prefill from the restore point captures snapshots for the bank.
void place_snapshots(const EngineContext& context, Sequence& seq) {
  if (!seq.publish || !context.model.schema().has_recurrent()) return;
  // Stored blocks beyond the restore point mean another conversation shared
  // this prefix and went on differently; a snapshot where they end lets the
  // next conversation that shares it restore that far.
  const RestoreRecord& rec = seq.result.restore;
  const int64_t branch_point = rec.matched_tokens > seq.restore_point ? rec.matched_tokens : 0;
  for (const auto& p : snapshot_positions(seq.prompt_tokens(), seq.request.message_boundary,
                                          context.options.block_tokens, context.options.snapshot_every, branch_point))
    if (p.position > seq.restore_point) seq.places.push_back(p);
}

// Installs the planned blocks and snapshot as the sequence's state once the
// model's check passes; a failed check quarantines them and leaves it cold.
void install_plan(const EngineContext& context, Sequence& seq, const RestorePlan& plan) {
  RestoreRecord& rec = seq.result.restore;
  std::vector<ObjectId> used;
  for (const auto& b : plan.blocks) used.push_back(ObjectId{ObjectKind::kBlock, b->key});
  if (plan.snapshot) used.push_back(ObjectId{ObjectKind::kSnapshot, plan.snapshot->key});
  State restored;
  Status composed = compose_state(context.model.schema(), plan.blocks, plan.snapshot, &restored);
  // The model's own check: derived components (pooled index rows) must
  // equal what the restored raw rows give.
  if (composed.is_ok()) composed = context.model.verify_state(restored);
  ++rec.checks;
  if (!composed.is_ok()) {
    // Which object is wrong is not known here: take them all out, so
    // this request (cold from here) publishes them again.
    ++rec.check_failures;
    context.bank->quarantine(used, "the restored state failed its check: " + composed.message());
    rec.miss_reason = MissReason::kCheckFailed;
    rec.diverged_at = -1;
    return;
  }
  if (context.hooks.tamper_restored_state) context.hooks.tamper_restored_state(restored);
  seq.result.restored_objects = used;
  seq.result.restored_chain.assign(seq.keys.begin(), seq.keys.begin() + static_cast<ptrdiff_t>(plan.blocks.size()) + 1);
  seq.state = std::move(restored);
  rec.mode = plan.mode();
  rec.restore_point = plan.restore_point;
  rec.common_prefix_tokens = plan.common_prefix_tokens;
  rec.snapshot_position = plan.snapshot_position;
  rec.blocks = static_cast<int64_t>(plan.blocks.size());
  rec.bytes_read = plan.bytes_read;
  rec.tiers = plan.tier_uses();
}

// Plans the restore of the prompt's longest stored prefix and installs it.
// REQUIRES: seq.keys set; the request is not an echo (it needs every logprob).
Status restore_from_bank(const EngineContext& context, Sequence& seq, EngineClock::time_point t_lookup) {
  const CompletionRequest& req = seq.request;
  const int64_t n = seq.prompt_tokens(), B = context.options.block_tokens;
  const std::span<const int32_t> prompt(req.prompt);
  RestoreRecord& rec = seq.result.restore;
  const int64_t m = (n - 1) / B;
  // The shared namespace (server/protocols/namespace.h): each position may also be
  // served under its name there.
  std::vector<Key> shared;
  if (!req.shared_name_space.empty())
    shared = chain_keys(root_key(kBankFormatVersion, context.model.fingerprint(), req.shared_name_space, B), prompt, B,
                        m);
  RestorePlan plan;
  SB_RETURN_IF_ERROR(context.bank->plan_restore(context.model.schema(),
                                                std::span<const Key>(seq.keys).first(static_cast<size_t>(m) + 1),
                                                prompt, B, &plan, shared));
  rec.lookup_ms = ms_since(t_lookup);
  const auto t_restore = EngineClock::now();
  rec.matched_tokens = plan.matched_tokens;
  rec.checks = plan.checks;
  rec.check_failures = plan.check_failures;
  rec.miss_reason = plan.miss_reason;
  rec.diverged_at = plan.diverged_at;
  // Nothing of the prompt is stored: the operator's other-namespace probe,
  // once the client-visible timings are taken (below).
  const bool probe_other_namespaces = plan.miss_reason == MissReason::kNoEntry && plan.matched_tokens == 0 && m > 0;
  // Nothing is stored, and this request (or this bank) stores nothing.
  if (rec.miss_reason == MissReason::kNoEntry && (req.cache_mode == CacheMode::kReadOnly || !context.bank->writable()))
    rec.miss_reason = MissReason::kReadOnly;
  if (plan.restore_point > 0) install_plan(context, seq, plan);
  rec.restore_ms = ms_since(t_restore);
  // Not timed in any field the client sees (lookup_ms, restore_ms).
  if (probe_other_namespaces)
    rec.stored_in_other_namespace =
        context.bank->stored_in_other_namespace(seq.keys[0], prompt.first(static_cast<size_t>(B)));
  return Status::ok();
}

}  // namespace

Status restore_prefix(const EngineContext& context, Sequence& seq) {
  const CompletionRequest& req = seq.request;
  const int64_t n = seq.prompt_tokens(), B = context.options.block_tokens;
  seq.use_bank = context.bank != nullptr && req.cache_mode != CacheMode::kBypass;
  seq.publish = seq.use_bank && req.cache_mode == CacheMode::kDefault;
  RestoreRecord& rec = seq.result.restore;
  rec.mode = seq.use_bank ? RestoreMode::cold() : RestoreMode::bypass();
  rec.miss_reason = !seq.use_bank ? MissReason::kBypass : req.echo ? MissReason::kEcho : MissReason::kNone;
  seq.state = context.model.new_state();
  if (seq.use_bank) {
    const auto t_lookup = EngineClock::now();
    seq.keys = chain_keys(root_key(kBankFormatVersion, context.model.fingerprint(), req.name_space, B),
                          std::span<const int32_t>(req.prompt), B, n / B);
    if (req.echo) rec.lookup_ms = ms_since(t_lookup);
    else SB_RETURN_IF_ERROR(restore_from_bank(context, seq, t_lookup));
  }
  seq.restore_point = seq.state.position();
  if (seq.restore_point >= (n - 1) / B * B) {  // the whole usable prefix, or none to use: no miss
    rec.miss_reason = MissReason::kNone;
    rec.diverged_at = -1;
    rec.stored_in_other_namespace = false;
  }
  rec.prefill_tokens = n - seq.restore_point;
  place_snapshots(context, seq);
  return Status::ok();
}

}  // namespace sb
