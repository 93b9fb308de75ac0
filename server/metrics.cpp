#include "server/metrics.h"

#include <cstdio>

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

void Metrics::record_completion(const RestoreRecord& restore, int64_t prompt_tokens, int64_t completion_tokens,
                                double ttft_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  completion_tokens_ += static_cast<uint64_t>(completion_tokens);
  cached_tokens_[restore.mode.index()] += static_cast<uint64_t>(restore.restore_point);
  ++restores_[restore.mode.index()];
  restore_check_failures_ += static_cast<uint64_t>(restore.check_failures);
  double s = ttft_ms / 1000.0;
  size_t b = 0;
  while (b < kTtftBuckets.size() && s > kTtftBuckets[b]) ++b;
  ++ttft_counts_[b];
  ttft_sum_s_ += s;
  ++ttft_count_;
}

std::string Metrics::render(const BankStatsView& bank, size_t queued, size_t running) const {
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
  header(out, "statebank_bank_bytes", "gauge", "Bytes held by the bank, by tier and object kind.");
  for (const auto& t : bank.tiers)
    for (const auto& [kind, v] : t.bytes)
      out += "statebank_bank_bytes{tier=\"" + label(tier_kind_name(t.tier)) + "\",kind=\"" + label(kind) + "\"} " + std::to_string(v) + "\n";
  header(out, "statebank_bank_objects", "gauge", "Objects held by the bank, by tier and object kind.");
  for (const auto& t : bank.tiers)
    for (const auto& [kind, v] : t.objects)
      out += "statebank_bank_objects{tier=\"" + label(tier_kind_name(t.tier)) + "\",kind=\"" + label(kind) + "\"} " + std::to_string(v) + "\n";
  header(out, "statebank_bank_evictions_total", "counter", "Objects evicted, by tier.");
  for (const auto& t : bank.tiers)
    out += "statebank_bank_evictions_total{tier=\"" + label(tier_kind_name(t.tier)) + "\"} " + std::to_string(t.evictions) + "\n";
  header(out, "statebank_bank_quarantined_total", "counter",
         "Objects taken out of a tier after a failed check (checksum, tokens, compose, audit), by tier.");
  for (const auto& t : bank.tiers)
    out += "statebank_bank_quarantined_total{tier=\"" + label(tier_kind_name(t.tier)) + "\"} " +
           std::to_string(t.quarantined) + "\n";
  header(out, "statebank_bank_read_bytes_total", "counter", "Bytes read from the bank, by tier.");
  for (const auto& t : bank.tiers)
    out += "statebank_bank_read_bytes_total{tier=\"" + label(tier_kind_name(t.tier)) + "\"} " + std::to_string(t.bytes_read) + "\n";
  header(out, "statebank_bank_written_bytes_total", "counter", "Bytes written to the bank, by tier.");
  for (const auto& t : bank.tiers)
    out += "statebank_bank_written_bytes_total{tier=\"" + label(tier_kind_name(t.tier)) + "\"} " + std::to_string(t.bytes_written) + "\n";
  // The SSD tier's own series, kept for dashboards that predate the per-tier ones.
  uint64_t ssd_read = 0, ssd_written = 0;
  for (const auto& t : bank.tiers)
    if (t.tier == TierKind::kSsd) ssd_read += t.bytes_read, ssd_written += t.bytes_written;
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
  header(out, "statebank_queue_depth", "gauge", "Requests waiting for a model worker.");
  out += "statebank_queue_depth " + std::to_string(queued) + "\n";
  header(out, "statebank_running_requests", "gauge", "Requests a model worker is running.");
  out += "statebank_running_requests " + std::to_string(running) + "\n";
  header(out, "statebank_time_to_first_token_seconds", "histogram", "Time from arrival to the first generated token.");
  uint64_t cumulative = 0;
  for (size_t b = 0; b < kTtftBuckets.size(); ++b) {
    cumulative += ttft_counts_[b];
    out += "statebank_time_to_first_token_seconds_bucket{le=\"" + num(kTtftBuckets[b]) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  cumulative += ttft_counts_[kTtftBuckets.size()];
  out += "statebank_time_to_first_token_seconds_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += "statebank_time_to_first_token_seconds_sum " + num(ttft_sum_s_) + "\n";
  out += "statebank_time_to_first_token_seconds_count " + std::to_string(ttft_count_) + "\n";
  return out;
}

}  // namespace sb
