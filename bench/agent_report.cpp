#include "bench/agent_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "bench/report_text.h"

namespace sb {
namespace {

std::string mb(uint64_t bytes) {
  if (bytes < 1000000) return fmt("%.1f kB", bytes / 1e3);
  if (bytes < 1000000000) return fmt("%.1f MB", bytes / 1e6);
  return fmt("%.2f GB", bytes / 1e9);
}
std::string pct(double x) { return fmt("%.1f %%", 100.0 * x); }
const char* verdict(bool met) { return met ? "met" : "**not met**"; }

struct TierTimes {
  double lookup_ms = 0, restore_ms = 0;
};

// A bank row followed by its bypass twin, served from one tier alone.
void add_served(const AgentResult& r, const AgentRow& row, ServedFrom* f, TierTimes* t) {
  if (f->n == 0) {
    f->prompt_tokens = row.prompt_tokens;
    f->restore_point = row.restore_point;
  }
  const size_t i = static_cast<size_t>(&row - r.rows.data());
  f->ms += row.ttft_ms;
  f->ratio += row.ttft_ratio;
  f->ratio_max = std::max(f->ratio_max, row.ttft_ratio);
  f->cold_ms += i + 1 < r.rows.size() ? r.rows[i + 1].ttft_ms : 0.0;
  ++f->n;
  f->bytes += row.bytes_read;
  f->wire += row.wire_received;
  t->lookup_ms += row.lookup_ms;
  t->restore_ms += row.lookup_ms + row.restore_ms;
}

void finish_served(const TierTimes& t, ServedFrom* f) {
  if (f->n) {
    f->ms /= f->n;
    f->ratio /= f->n;
    f->cold_ms /= f->n;
  }
  if (t.lookup_ms > 0) f->gbps = f->bytes / (t.lookup_ms * 1e-3) / 1e9;
  if (t.restore_ms > 0) f->e2e_gbps = f->bytes / (t.restore_ms * 1e-3) / 1e9;
}


}  // namespace

AgentSummary summarize(const AgentResult& r) {
  AgentSummary s;
  double prefill_tokens = 0, prefill_ms = 0, decode_tokens = 0, decode_ms = 0;
  TierTimes ssd_times, remote_times;
  bool first_bank = true;
  for (const auto& row : r.rows) {
    if (row.mode == "bypass") {
      if (row.turn == 0) {
        s.cold_first_ms += row.ttft_ms;
        ++s.n_cold_first;
      } else {
        s.cold_later_ms += row.ttft_ms;
        ++s.n_cold_later;
      }
      prefill_tokens += static_cast<double>(row.prefill_tokens);
      prefill_ms += row.prefill_ms;
      if (row.generated > 1) {
        decode_tokens += static_cast<double>(row.generated - 1);
        decode_ms += row.total_ms - row.ttft_ms;
      }
      continue;
    }
    ++s.requests;
    if (row.equal_to_bypass) ++s.equal;
    s.prompt_tokens += row.prompt_tokens;
    s.skipped_tokens += row.restore_point;
    if (first_bank) {
      s.populate_ratio = row.ttft_ratio;
      first_bank = false;
    }
    if (row.served == "ram") {
      s.ram_ms += row.ttft_ms;
      s.ram_ratio += row.ttft_ratio;
      s.ram_ratio_max = std::max(s.ram_ratio_max, row.ttft_ratio);
      ++s.n_ram;
    } else if (row.served == "ssd" && row.phase == "after") {
      add_served(r, row, &s.ssd, &ssd_times);
    } else if (row.served == "remote" && row.phase == "replica") {
      add_served(r, row, &s.remote, &remote_times);
    } else if (row.served == "mixed") {
      s.mixed_ratio += row.ttft_ratio;
      ++s.n_mixed;
    }
  }
  if (s.n_cold_first) s.cold_first_ms /= s.n_cold_first;
  if (s.n_cold_later) s.cold_later_ms /= s.n_cold_later;
  if (s.n_ram) {
    s.ram_ms /= s.n_ram;
    s.ram_ratio /= s.n_ram;
  }
  finish_served(ssd_times, &s.ssd);
  finish_served(remote_times, &s.remote);
  if (s.n_mixed) s.mixed_ratio /= s.n_mixed;
  if (r.dd_ran && r.dd_seconds > 0) s.dd_gbps = r.dd_bytes / r.dd_seconds / 1e9;
  if (s.dd_gbps > 0) s.restore_vs_dd = s.ssd.gbps / s.dd_gbps;
  if (r.disk_bytes > 0) {
    s.dedup_ratio = static_cast<double>(r.ideal_bytes) / static_cast<double>(r.disk_bytes);
    s.saving = static_cast<double>(r.naive_bytes) / static_cast<double>(r.disk_bytes);
  }
  if (prefill_ms > 0) s.prefill_tps = prefill_tokens / (prefill_ms * 1e-3);
  if (decode_ms > 0) s.decode_tps = decode_tokens / (decode_ms * 1e-3);
  return s;
}

std::string agent_csv(const AgentResult& r) {
  std::ostringstream out;
  out << "request,phase,turn,project,mode,served,prompt_tokens,message_boundary,ttft_ms,total_ms,restore_point,"
         "snapshot_position,prefill_tokens,blocks,bytes_read,lookup_ms,restore_ms,prefill_ms,generated,ttft_ratio,"
         "equal_to_bypass,disk_bytes,naive_bytes,ideal_bytes,wire_received,wire_sent,tokens\n";
  for (const auto& x : r.rows) {
    const bool bank = x.mode == "bank";
    out << x.request << ',' << x.phase << ',' << x.turn << ',' << x.project << ',' << x.mode << ',' << x.served
        << ',' << x.prompt_tokens << ',' << x.message_boundary << ',' << fmt("%.3f", x.ttft_ms) << ','
        << fmt("%.3f", x.total_ms) << ',' << x.restore_point << ',' << x.snapshot_position << ','
        << x.prefill_tokens << ',' << x.blocks << ',' << x.bytes_read << ',' << fmt("%.3f", x.lookup_ms) << ','
        << fmt("%.3f", x.restore_ms) << ',' << fmt("%.3f", x.prefill_ms) << ',' << x.generated << ','
        << (bank ? fmt("%.5f", x.ttft_ratio) : "") << ',' << (bank ? (x.equal_to_bypass ? "1" : "0") : "") << ','
        << (bank ? std::to_string(x.disk_bytes) : "") << ',' << (bank ? std::to_string(x.naive_bytes) : "")
        << ',' << (bank ? std::to_string(x.ideal_bytes) : "") << ',' << (bank ? std::to_string(x.wire_received) : "")
        << ',' << (bank ? std::to_string(x.wire_sent) : "") << ',';
    for (size_t i = 0; i < x.tokens.size(); ++i) out << (i ? " " : "") << x.tokens[i];
    out << '\n';
  }
  return out.str();
}

namespace {

// The report's sections, in order.
void md_intro(std::ostringstream& md, const AgentResult& r, const AgentWorkloadOptions& o,
              const AgentReportContext& c, const AgentSummary& s) {
  md << "# Agent workload: what the bank buys\n\n";
  md << "Generated by `statebank bench agent` on " << c.date << " (" << c.machine << ", " << c.threads
     << " threads), model " << c.model << ". Reproduce with:\n\n```sh\n" << c.command << "\n```\n\n";
  md << "Workload: a shared prefix of " << o.prefix_tokens << " tokens, " << o.projects << " projects with "
     << o.project_tokens << " tokens of their own data each, messages of " << o.message_tokens
     << " tokens, replies of " << o.reply_tokens << " generated tokens (greedy); " << o.turns
     << " turns per project, then a restart (engine, bank and tiers destroyed; the SSD tier reopened from "
        "its directory, an empty RAM tier), then "
     << o.turns_after << " more"
     << (r.remote ? "; every bank also had a Redis tier (`" + o.remote_url +
                        "`) below RAM and SSD, and then a replica (a fresh engine and bank: an empty RAM tier and "
                        "the same Redis, no SSD) ran " + std::to_string(o.turns_after) + " more"
                  : std::string())
     << ". Blocks of " << o.block_tokens << " tokens, a snapshot every " << o.snapshot_every
     << " tokens. Every bank request ran next to its twin with the bank bypassed (the *cold* figure). "
     << "Whole run: " << fmt("%.0f", r.wall_seconds) << " s.\n\n";
}

void md_headline(std::ostringstream& md, const AgentResult& r, const AgentWorkloadOptions& o,
                 const AgentReportContext& c, const AgentSummary& s) {
  md << "## Headline\n\n";
  md << "| measure | value | target |\n| --- | --- | --- |\n";
  md << "| bank responses equal to the bypass run, bit for bit (tokens, logprobs, top " << o.top_logprobs
     << " alternatives) | " << s.equal << " of " << s.requests << " | all: " << verdict(s.equal == s.requests)
     << " |\n";
  md << "| time to first token, cold (bypass), first turn | " << fmt("%.0f ms", s.cold_first_ms) << " (mean of "
     << s.n_cold_first << ") | |\n";
  if (s.n_cold_later)
    md << "| time to first token, cold (bypass), later turns | " << fmt("%.0f ms", s.cold_later_ms) << " (mean of "
       << s.n_cold_later << ") | |\n";
  md << "| first request on an empty bank (computes and publishes) | " << pct(s.populate_ratio) << " of cold | |\n";
  if (s.n_ram)
    md << "| warm from RAM | " << fmt("%.0f ms", s.ram_ms) << ", " << pct(s.ram_ratio) << " of cold (mean of "
       << s.n_ram << ", worst " << pct(s.ram_ratio_max) << ") | |\n";
  if (s.ssd.n)
    md << "| **warm from SSD after the restart** (prompt " << s.ssd.prompt_tokens << " tokens, restored "
       << s.ssd.restore_point << ") | " << fmt("%.0f ms", s.ssd.ms) << ", **" << pct(s.ssd.ratio)
       << "** of cold (mean of " << s.ssd.n << ", worst " << pct(s.ssd.ratio_max) << ") | <= 5 %: "
       << verdict(s.ssd.ratio_max <= 0.05) << " |\n";
  else
    md << "| warm from SSD after the restart | no request was served from the SSD tier alone | <= 5 % |\n";
  if (r.remote) {
    if (s.remote.n)
      md << "| **warm from Redis on a fresh replica** (prompt " << s.remote.prompt_tokens << " tokens, restored "
         << s.remote.restore_point << ") | " << fmt("%.0f ms", s.remote.ms) << ", **" << pct(s.remote.ratio)
         << "** of cold (mean of " << s.remote.n << ", worst " << pct(s.remote.ratio_max) << ") | |\n";
    else
      md << "| warm from Redis on a fresh replica | no request was served from the remote tier alone | |\n";
  }
  if (s.n_mixed)
    md << "| warm after the restart, tiers mixed (shared prefix already promoted) | " << pct(s.mixed_ratio)
       << " of cold (mean of " << s.n_mixed << ") | |\n";
  md << "| prefill tokens skipped | " << s.skipped_tokens << " of " << s.prompt_tokens << " prompt tokens ("
     << pct(s.prompt_tokens ? static_cast<double>(s.skipped_tokens) / s.prompt_tokens : 0) << ") | |\n";
  if (s.ssd.n && r.dd_ran)
    md << "| restore read throughput (SSD) vs `dd` | " << fmt("%.2f GB/s", s.ssd.gbps) << " vs "
       << fmt("%.2f GB/s", s.dd_gbps) << ": **" << fmt("%.3f", s.restore_vs_dd) << "** | >= 0.9: "
       << verdict(s.restore_vs_dd >= 0.9) << " |\n"
       << "| restore end to end (SSD reads and checks, then composing the State) | "
       << fmt("%.2f GB/s", s.ssd.e2e_gbps) << " | |\n";
  else
    md << "| restore read throughput (SSD) vs `dd` | not measured: " << (s.ssd.n ? r.dd_note : "no SSD request")
       << " | >= 0.9 |\n";
  if (s.remote.n)
    md << "| restore throughput from Redis (pipelined reads and checks; end to end with composing) | "
       << fmt("%.2f GB/s", s.remote.gbps) << "; " << fmt("%.2f GB/s", s.remote.e2e_gbps)
       << (s.ssd.n ? " (SSD: " + fmt("%.2f GB/s", s.ssd.gbps) + "; " + fmt("%.2f GB/s", s.ssd.e2e_gbps) + ")"
                   : std::string())
       << " | |\n"
       << "| bytes on the wire for those restores (received) / payload restored | " << mb(s.remote.wire) << " / "
       << mb(s.remote.bytes) << " | |\n";
  if (r.remote)
    md << "| Redis traffic, whole run: received / sent; objects not written (queue, errors); values that failed "
          "a check | "
       << mb(r.remote_wire_received) << " / " << mb(r.remote_wire_sent) << "; " << r.remote_dropped_puts << ", "
       << r.remote_write_errors << "; " << r.remote_check_failures << " | |\n";
  md << "| bank bytes on disk / ideal / naive (every prompt alone) | " << mb(r.disk_bytes) << " / "
     << mb(r.ideal_bytes) << " / " << mb(r.naive_bytes) << " | |\n";
  md << "| dedup ratio (ideal / on disk) | **" << fmt("%.3f", s.dedup_ratio) << "** (naive / on disk: "
     << fmt("%.1fx", s.saving) << ") | >= 0.9: " << verdict(s.dedup_ratio >= 0.9) << " |\n";
  md << "| on disk beyond the ideal: snapshots no request of this run restored from; the rest (file headers, "
        "part tables, anything stored twice) | "
     << r.unused_snapshots << " snapshots, " << mb(r.unused_snapshot_bytes) << "; "
     << (r.other_disk_bytes < 0 ? "-" : "") << mb(static_cast<uint64_t>(std::llabs(r.other_disk_bytes)))
     << " | |\n";
  if (r.ssd_dropped_puts + r.ssd_write_errors > 0)
    md << "| **objects that never reached the disk** (queue full, write errors) | " << r.ssd_dropped_puts << ", "
       << r.ssd_write_errors << " | 0 |\n";
  md << "| prefill, cold | " << fmt("%.1f tokens/s", s.prefill_tps) << " | |\n";
  md << "| decode | " << fmt("%.1f tokens/s", s.decode_tps) << " | |\n\n";
}

void md_remote_vs_ssd(std::ostringstream& md, const AgentResult& r, const AgentWorkloadOptions& o,
                      const AgentReportContext& c, const AgentSummary& s) {
  if (r.remote) {
    md << "## Remote vs SSD vs cold\n\n";
    md << "The same workload served three ways: from the SSD tier after the restart (the first request of each "
          "turn; the others mix in what it promoted to RAM), from Redis on the replica (likewise), and cold (each "
          "request's bypass twin).\n\n";
    md << "| served from | requests | time to first token | its cold twin | ratio | restore throughput (lookup; "
          "end to end) | restored | received on the wire |\n";
    md << "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    if (s.ssd.n)
      md << "| SSD, after the restart | " << s.ssd.n << " | " << fmt("%.0f ms", s.ssd.ms) << " | "
         << fmt("%.0f ms", s.ssd.cold_ms) << " | " << pct(s.ssd.ratio) << " | " << fmt("%.2f", s.ssd.gbps)
         << "; " << fmt("%.2f GB/s", s.ssd.e2e_gbps) << " | " << mb(s.ssd.bytes) << " | - |\n";
    if (s.remote.n)
      md << "| Redis, on the replica | " << s.remote.n << " | " << fmt("%.0f ms", s.remote.ms) << " | "
         << fmt("%.0f ms", s.remote.cold_ms) << " | " << pct(s.remote.ratio) << " | " << fmt("%.2f", s.remote.gbps)
         << "; " << fmt("%.2f GB/s", s.remote.e2e_gbps) << " | " << mb(s.remote.bytes) << " | " << mb(s.remote.wire)
         << " |\n";
    md << "\n";
  }
}

void md_requests(std::ostringstream& md, const AgentResult& r, const AgentWorkloadOptions& o,
                 const AgentReportContext& c, const AgentSummary& s) {
  if (!r.mismatches.empty()) {
    md << "## MISMATCHES\n\nThese bank responses differ from their bypass twins:\n\n";
    for (const auto& m : r.mismatches) md << "- " << m << "\n";
    md << "\n";
  }

  md << "## Per request\n\n";
  md << "| # | phase | turn | project | prompt | served | restore point | prefilled | cold ttft | bank ttft | ratio | "
        "read | equal |\n";
  md << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (size_t i = 0; i + 1 < r.rows.size(); i += 2) {
    const AgentRow &w = r.rows[i], &b = r.rows[i + 1];
    md << "| " << w.request << " | " << w.phase << " | " << w.turn << " | " << w.project << " | " << w.prompt_tokens
       << " | " << w.served << " | " << w.restore_point << " | " << w.prefill_tokens << " | "
       << fmt("%.0f ms", b.ttft_ms) << " | " << fmt("%.0f ms", w.ttft_ms) << " | " << pct(w.ttft_ratio) << " | "
       << mb(w.bytes_read) << " | " << (w.equal_to_bypass ? "yes" : "**NO**") << " |\n";
  }
  md << "\nEvery row, with the timing breakdown (lookup, restore, prefill) and the generated ids: [" << c.csv_name
     << "](" << c.csv_name << ").\n\n";

  if (!c.plots.empty()) {
    md << "## Plots\n\n";
    for (const auto& [title, file] : c.plots) md << "![" << title << "](" << file << ")\n\n";
  } else if (!c.plots_note.empty()) {
    md << "## Plots\n\n" << c.plots_note << "\n\n";
  }
}

void md_bank_contents(std::ostringstream& md, const AgentResult& r, const AgentWorkloadOptions& o,
                      const AgentReportContext& c, const AgentSummary& s) {
  md << "## Bank contents\n\n";
  md << "At the end: " << r.ssd_blocks << " blocks and " << r.ssd_snapshots << " snapshots on disk, "
     << r.disk_files << " files, " << mb(r.disk_bytes) << ". One block's state is " << mb(r.block_state_bytes)
     << " (" << o.block_tokens << " tokens with their ids), one snapshot " << mb(r.snapshot_state_bytes)
     << ". The ideal holds the " << r.distinct_blocks << " distinct blocks of all prompts and the "
     << r.needed_snapshots
     << " snapshots the run needed (those a request restored from, and each conversation's last prompt end, "
        "which its next turn restores). The bank also keeps interval snapshots (every "
     << o.snapshot_every
     << " tokens), message-boundary snapshots and the last boundary a replay of each prompt could use "
        "(engine/engine.h, snapshot_positions), for prompts that diverge there later; this run left "
     << r.unused_snapshots << " of them unused (" << mb(r.unused_snapshot_bytes)
     << "). Everything else on disk beyond the ideal (file headers, part tables) comes to "
     << (r.other_disk_bytes < 0 ? "-" : "") << mb(static_cast<uint64_t>(std::llabs(r.other_disk_bytes)))
     << (std::llabs(r.other_disk_bytes) * 100 < static_cast<int64_t>(r.disk_bytes)
             ? ": every object is stored once.\n\n"
             : ", more than headers and part tables take: **some state is stored more than once**.\n\n");
}

void md_method(std::ostringstream& md, const AgentResult& r, const AgentWorkloadOptions& o,
               const AgentReportContext& c, const AgentSummary& s) {
  md << "## How it is measured\n\n";
  md << "- One process: the model is loaded once; the Engine runs in-process (engine/engine.h) over a Bank of a "
        "RAM tier and an SSD tier in `"
     << c.bank_dir << "`. Time to first token is the engine's own `ttft_ms` (lookup, restore, prefill, first "
        "sample).\n";
  md << "- Each bank request is followed by its bypass twin (`CacheMode::kBypass`, same prompt); the bench "
        "compares the two responses bit for bit and fails (exit 1) on any difference.\n";
  md << "- After each bank request the SSD write queue is flushed outside the timed region.\n";
  md << "- Restore read throughput: bytes read / lookup time of the requests served from the SSD tier alone "
        "after the restart (the SSD tier reads with direct I/O and checks each object during the lookup); end "
        "to end adds the restore time (composing and checking the State).\n";
  if (r.dd_ran)
    md << "- Baseline: `" << r.dd_command << "` run as a subprocess on a " << mb(r.dd_bytes)
       << " file written (and fsynced) on the bank's file system in the same run; its byte count and seconds "
          "parsed from dd's output: "
       << fmt("%.2f GB/s", s.dd_gbps) << (r.dd_note.empty() ? "" : " (" + r.dd_note + ")") << ".\n";
  else
    md << "- Baseline dd: " << r.dd_note << ".\n";
  if (r.remote)
    md << "- Redis (`" << o.remote_url << "`): the tier pipelines a restore's presence questions (EXISTS) in one "
          "round trip and its reads (GETEX) in another, and checks every value like an SSD file; the bytes on the "
          "wire are those its sockets received during the request and its write-out. The run's keys live under "
          "their own prefix and expire an hour after their last use. Redis ran on the same machine (loopback), so "
          "the figures show the tier's own cost, not a network's.\n";
  md << "- Prefill and decode speed come from the bypass runs: prompt tokens / prefill time, and generated "
        "tokens after the first / (total time - time to first token).\n";
  md << "- Token ids are deterministic pseudo-random ids (seed " << o.seed
     << "): the bank is content-addressed, so what matters is the sharing structure.\n";
  md << "- Model fingerprint: `" << c.fingerprint << "`.\n";
}

}  // namespace

std::string agent_markdown(const AgentResult& r, const AgentWorkloadOptions& o, const AgentReportContext& c) {
  const AgentSummary s = summarize(r);
  std::ostringstream md;
  md_intro(md, r, o, c, s);
  md_headline(md, r, o, c, s);
  md_remote_vs_ssd(md, r, o, c, s);
  md_requests(md, r, o, c, s);
  md_bank_contents(md, r, o, c, s);
  md_method(md, r, o, c, s);
  return md.str();
}

}  // namespace sb
