#include "server/operator/metrics.h"

#include <cstdio>

#include "common/json_shape.h"

namespace sb {

namespace {

// Label values are ours (endpoints, tiers, kinds), but escape anyway: a
// stray quote would break the whole scrape.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

}  // namespace

void Metrics::record_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::record_speculation(const SpeculativeRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  speculative_.steps += r.steps;
  speculative_.tokens += r.tokens;
  speculative_.drafted += r.drafted;
  speculative_.accepted += r.accepted;
  speculative_.switched_off += r.switched_off;
  if (r.row_cost > 0.0) speculative_.row_cost = r.row_cost;  // the latest estimate
}

void Metrics::record_completion(const RestoreRecord& restore, int64_t prompt_tokens, int64_t completion_tokens,
                                double ttft_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  completion_tokens_ += static_cast<uint64_t>(completion_tokens);
  cached_tokens_[restore.mode.index()] += static_cast<uint64_t>(restore.restore_point);
  ++restores_[restore.mode.index()];
  restore_check_failures_ += static_cast<uint64_t>(restore.check_failures);
  ttft_.add(kTtftBuckets, ttft_ms / 1000.0);
  const MissReason reason = operator_miss_reason(restore.miss_reason, restore.stored_in_other_namespace);
  if (reason != MissReason::kNone) ++misses_[static_cast<size_t>(reason)];
  if (restore.restore_point > 0) {
    ++(reason == MissReason::kNone ? full_hits_ : partial_hits_);
    restore_bytes_.add(kRestoreByteBuckets, static_cast<double>(restore.bytes_read));
    restore_seconds_.add(kRestoreSecondBuckets, (restore.lookup_ms + restore.restore_ms) / 1000.0);
  }
}

namespace {

template <size_t N>
void histogram(std::string& out, const char* name, const std::array<double, N>& bounds,
               const Metrics::Histogram<N>& h) {
  uint64_t cumulative = 0;
  for (size_t b = 0; b < N; ++b) {
    cumulative += h.counts[b];
    out += std::string(name) + "_bucket{le=\"" + num(bounds[b]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += h.counts[N];
  out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += std::string(name) + "_sum " + num(h.sum) + "\n";
  out += std::string(name) + "_count " + std::to_string(h.count) + "\n";
}

// The bank's per-tier series.
void render_tiers(std::string& out, const BankStatsView& bank) {
  // By object kind: the block and the snapshot field of TierStats.
  auto per_tier_kind = [&](const char* name, const char* help, uint64_t TierStats::*block,
                           uint64_t TierStats::*snapshot) {
    header(out, name, "gauge", help);
    for (const auto& t : bank.tiers)
      for (const auto& [kind, field] : {std::pair{"block", block}, std::pair{"snapshot", snapshot}})
        out += std::string(name) + "{tier=\"" + label(tier_kind_name(t.tier)) + "\",kind=\"" + label(kind) + "\"} " +
               std::to_string(t.stats.*field) + "\n";
  };
  auto per_tier = [&](const char* name, const char* help, uint64_t TierStats::*field) {
    header(out, name, "counter", help);
    for (const auto& t : bank.tiers)
      out += std::string(name) + "{tier=\"" + label(tier_kind_name(t.tier)) + "\"} " + std::to_string(t.stats.*field) +
             "\n";
  };
  per_tier_kind("statebank_bank_bytes", "Bytes held by the bank, by tier and object kind.", &TierStats::block_bytes,
                &TierStats::snapshot_bytes);
  per_tier_kind("statebank_bank_objects", "Objects held by the bank, by tier and object kind.", &TierStats::blocks,
                &TierStats::snapshots);
  per_tier("statebank_bank_evictions_total", "Objects evicted, by tier.", &TierStats::evictions);
  per_tier("statebank_bank_quarantined_total",
           "Objects taken out of a tier after a failed check (checksum, tokens, compose, audit), by tier.",
           &TierStats::quarantined);
  per_tier("statebank_bank_hits_total", "Objects a tier served (its checks passed), by tier.", &TierStats::hits);
  per_tier("statebank_bank_misses_total", "Reads a tier could not serve (absent, failed a check, unavailable), by tier.",
           &TierStats::misses);
  per_tier("statebank_bank_read_bytes_total", "Bytes read from the bank, by tier.", &TierStats::bytes_read);
  per_tier("statebank_bank_written_bytes_total", "Bytes written to the bank, by tier.", &TierStats::bytes_written);
}

// The remote tier's own series.
void render_remote(std::string& out, const RedisStats& r) {
  auto single = [&](const char* name, const char* type, const char* help, uint64_t v) {
    header(out, name, type, help);
    out += std::string(name) + " " + std::to_string(v) + "\n";
  };
  single("statebank_remote_available", "gauge", "1 while the remote tier answers (its circuit breaker is closed).",
         r.available ? 1 : 0);
  single("statebank_remote_trips_total", "counter", "Times the remote tier became unavailable.", r.trips);
  single("statebank_remote_timeouts_total", "counter", "Remote calls that ran out of time.", r.timeouts);
  single("statebank_remote_failures_total", "counter", "Remote calls that failed otherwise (refused, reset, server error).",
         r.failures);
  single("statebank_remote_skipped_calls_total", "counter",
         "Remote calls answered as misses at once while the tier was unavailable.", r.skipped_calls);
  header(out, "statebank_remote_wire_bytes_total", "counter", "Bytes on the remote tier's sockets, by direction.");
  out += "statebank_remote_wire_bytes_total{direction=\"sent\"} " + std::to_string(r.wire_bytes_sent) + "\n";
  out += "statebank_remote_wire_bytes_total{direction=\"received\"} " + std::to_string(r.wire_bytes_received) + "\n";
  single("statebank_remote_dropped_puts_total", "counter",
         "Objects not written to the remote tier (its queue was full or it was unavailable).", r.dropped_puts);
  single("statebank_remote_write_errors_total", "counter", "Writes the remote server refused (e.g. OOM).", r.write_errors);
  single("statebank_remote_mac_failures_total", "counter",
         "Remote values read whose MAC was missing or wrong (rewritten, or another secret): misses, never installed.",
         r.mac_failures);
}

// The SSD tier's legacy pair and the audit counters.
void render_ssd_and_audits(std::string& out, const BankStatsView& bank) {
  // The SSD tier's own series, kept for dashboards that predate the per-tier ones.
  uint64_t ssd_read = 0, ssd_written = 0;
  for (const auto& t : bank.tiers)
    if (t.tier == TierKind::kSsd) ssd_read += t.stats.bytes_read, ssd_written += t.stats.bytes_written;
  header(out, "statebank_ssd_read_bytes_total", "counter", "Bytes read from the SSD tier.");
  out += "statebank_ssd_read_bytes_total " + std::to_string(ssd_read) + "\n";
  header(out, "statebank_ssd_written_bytes_total", "counter", "Bytes written to the SSD tier.");
  out += "statebank_ssd_written_bytes_total " + std::to_string(ssd_written) + "\n";
  header(out, "statebank_audits_total", "counter", "Restored requests recomputed cold (--audit).");
  out += "statebank_audits_total " + std::to_string(bank.audits) + "\n";
  header(out, "statebank_audit_mismatches_total", "counter", "Audited requests whose cold result differed.");
  out += "statebank_audit_mismatches_total " + std::to_string(bank.audit_mismatches) + "\n";
  header(out, "statebank_audits_dropped_total", "counter",
         "Sampled audits not run: the audit queue was full, or a request arrived while one ran.");
  out += "statebank_audits_dropped_total " + std::to_string(bank.audits_dropped) + "\n";
}

// Counters, so that any window's acceptance (accepted / drafted) and tokens
// per step (decode tokens / decode steps) are ratios of their increases;
// the gauges give them over the server's life.
void render_speculation(std::string& out, const SpeculativeRecord& s) {
  header(out, "statebank_speculative_drafted_tokens_total", "counter", "Draft tokens verified (speculative decoding).");
  out += "statebank_speculative_drafted_tokens_total " + std::to_string(s.drafted) + "\n";
  header(out, "statebank_speculative_accepted_tokens_total", "counter", "Draft tokens accepted.");
  out += "statebank_speculative_accepted_tokens_total " + std::to_string(s.accepted) + "\n";
  header(out, "statebank_decode_steps_total", "counter",
         "Decode steps of completed requests (one per sequence and step).");
  out += "statebank_decode_steps_total " + std::to_string(s.steps) + "\n";
  header(out, "statebank_decode_step_tokens_total", "counter", "Tokens those decode steps emitted.");
  out += "statebank_decode_step_tokens_total " + std::to_string(s.tokens) + "\n";
  header(out, "statebank_speculative_paused_total", "counter", "Times a sequence's acceptance fell below break-even.");
  out += "statebank_speculative_paused_total " + std::to_string(s.switched_off) + "\n";
  header(out, "statebank_speculative_acceptance", "gauge", "Accepted over drafted tokens since start.");
  out += "statebank_speculative_acceptance " + std::to_string(s.acceptance()) + "\n";
  header(out, "statebank_decode_tokens_per_step", "gauge", "Decode tokens per decode step since start.");
  out += "statebank_decode_tokens_per_step " + std::to_string(s.tokens_per_step()) + "\n";
  header(out, "statebank_speculative_verify_row_cost", "gauge",
         "A verify row's cost as a share of a one-row step, measured while serving (latest completion's).");
  out += "statebank_speculative_verify_row_cost " + std::to_string(s.row_cost) + "\n";
}

}  // namespace

std::string Metrics::render(const BankStatsView& bank, size_t queued, size_t running,
                            const ServingCounts& counts) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  header(out, "statebank_requests_total", "counter", "HTTP requests by endpoint and status code.");
  for (const auto& [k, v] : requests_)
    out += "statebank_requests_total{endpoint=\"" + label(k.first) + "\",code=\"" + std::to_string(k.second) + "\"} " +
           std::to_string(v) + "\n";
  header(out, "statebank_prompt_tokens_total", "counter", "Prompt tokens of completed requests.");
  out += "statebank_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  header(out, "statebank_completion_tokens_total", "counter", "Generated tokens of completed requests.");
  out += "statebank_completion_tokens_total " + std::to_string(completion_tokens_) + "\n";
  render_speculation(out, speculative_);
  header(out, "statebank_cached_tokens_total", "counter",
         "Prompt tokens served from the bank (restore_point), by the tier they came from.");
  for (size_t i = 0; i < RestoreMode::kCount; ++i) {
    const RestoreMode mode = RestoreMode::at(i);
    if (!mode.restored()) continue;
    out += std::string("statebank_cached_tokens_total{tier=\"") + mode.name() + "\"} " +
           std::to_string(cached_tokens_[i]) + "\n";
  }
  header(out, "statebank_restores_total", "counter", "Completed requests by restore mode.");
  for (size_t i = 0; i < RestoreMode::kCount; ++i)
    out += std::string("statebank_restores_total{mode=\"") + RestoreMode::at(i).name() + "\"} " +
           std::to_string(restores_[i]) + "\n";
  header(out, "statebank_check_failures_total", "counter",
         "Bank objects that failed a check (a miss, never served), by kind.");
  bool any_kind = false;
  for (const auto& [kind, v] : bank.check_failures) {
    out += "statebank_check_failures_total{kind=\"" + label(kind) + "\"} " + std::to_string(v) + "\n";
    any_kind = true;
  }
  if (!any_kind)
    out += "statebank_check_failures_total{kind=\"restore\"} " + std::to_string(restore_check_failures_) + "\n";
  render_tiers(out, bank);
  if (bank.remote) render_remote(out, *bank.remote);
  render_ssd_and_audits(out, bank);
  header(out, "statebank_responses_cut_total", "counter",
         "Responses cut off before they were written whole (the connection closed), by why.");
  out += "statebank_responses_cut_total{reason=\"write_timeout\"} " + std::to_string(counts.cut_deadline) + "\n";
  out += "statebank_responses_cut_total{reason=\"slow_reader_share\"} " + std::to_string(counts.cut_share) + "\n";
  out += "statebank_responses_cut_total{reason=\"buffer_full\"} " + std::to_string(counts.cut_buffer) + "\n";
  header(out, "statebank_json_parses_total", "counter",
         "JSON texts from requests parsed: bodies, and tool calls' arguments given as text.");
  out += "statebank_json_parses_total{text=\"body\"} " + std::to_string(json_parses(JsonText::kBody)) + "\n";
  out += "statebank_json_parses_total{text=\"tool_arguments\"} " +
         std::to_string(json_parses(JsonText::kToolArguments)) + "\n";
  header(out, "statebank_pins_refused_total", "counter",
         "cache_control pins refused (the request ran unpinned), by which budget of its tenant was full.");
  out += "statebank_pins_refused_total{budget=\"pins\"} " + std::to_string(counts.pins_refused_count) + "\n";
  out += "statebank_pins_refused_total{budget=\"bytes\"} " + std::to_string(counts.pins_refused_bytes) + "\n";
  header(out, "statebank_queue_depth", "gauge", "Requests waiting for a model worker.");
  out += "statebank_queue_depth " + std::to_string(queued) + "\n";
  header(out, "statebank_running_requests", "gauge", "Requests a model worker is running.");
  out += "statebank_running_requests " + std::to_string(running) + "\n";
  header(out, "statebank_time_to_first_token_seconds", "histogram", "Time from arrival to the first generated token.");
  histogram(out, "statebank_time_to_first_token_seconds", kTtftBuckets, ttft_);
  header(out, "statebank_prefix_hits_total", "counter",
         "Requests that restored their whole usable prefix (full) or part of it (partial).");
  out += "statebank_prefix_hits_total{extent=\"full\"} " + std::to_string(full_hits_) + "\n";
  out += "statebank_prefix_hits_total{extent=\"partial\"} " + std::to_string(partial_hits_) + "\n";
  header(out, "statebank_prefix_misses_total", "counter",
         "Requests whose restore point is below their longest usable prefix, by reason (partial hits included).");
  for (size_t i = 1; i < kMissReasons; ++i)
    out += std::string("statebank_prefix_misses_total{reason=\"") + miss_reason_name(static_cast<MissReason>(i)) +
           "\"} " + std::to_string(misses_[i]) + "\n";
  header(out, "statebank_restore_bytes", "histogram", "Bytes read from the bank by requests that restored a prefix.");
  histogram(out, "statebank_restore_bytes", kRestoreByteBuckets, restore_bytes_);
  header(out, "statebank_restore_seconds", "histogram",
         "Lookup and restore time of requests that restored a prefix (prefill excluded).");
  histogram(out, "statebank_restore_seconds", kRestoreSecondBuckets, restore_seconds_);
  return out;
}

}  // namespace sb
