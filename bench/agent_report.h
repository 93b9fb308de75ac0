// The agent workload's outputs: the headline figures computed from one run
// (bench/agent_workload.h), the per-request CSV and the markdown report.
//
// Definitions (also written into the report):
//  - cold: the bypass twin of a request (CacheMode::kBypass), same prompt;
//  - a ratio is the bank request's time to first token over its twin's;
//  - restore read throughput: bytes_read / lookup_ms of the requests served
//    from the SSD tier alone (the tier's reads and checks happen during the
//    lookup), against dd's direct-I/O read of a file of about the same size
//    on the same file system, in the same run; end to end it also counts
//    restore_ms (composing the State);
//  - naive bytes: the sum over bank requests of the state of their full
//    blocks plus one snapshot, as if every prompt were stored alone;
//  - ideal bytes: every distinct block once plus the snapshots actually
//    needed (those some request restored from, and the last prompt end of
//    each conversation, which its next turn needs);
//  - dedup ratio: ideal bytes / bytes on disk (1 = nothing beyond the ideal);
//  - remote (with --remote): the replica's requests served from the Redis
//    tier alone; restore throughput as for SSD (bytes_read / lookup_ms, the
//    tier's pipelined reads and checks happen during the lookup), and the
//    bytes its sockets received for them (payload plus RESP framing and the
//    presence probe).
// Pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "bench/agent_workload.h"

namespace sb {

struct AgentSummary {
  int requests = 0;               // bank requests (each has a bypass twin)
  int equal = 0;                  // bank requests equal to their twin bit for bit
  double cold_first_ms = 0;       // mean bypass ttft, turn 0
  double cold_later_ms = 0;       // mean bypass ttft, turns >= 1
  int n_cold_first = 0, n_cold_later = 0;
  double populate_ratio = 0;      // the very first bank request (empty bank) / its twin
  double ram_ms = 0, ram_ratio = 0, ram_ratio_max = 0;
  int n_ram = 0;
  double ssd_ms = 0, ssd_ratio = 0, ssd_ratio_max = 0;  // served "ssd", after the restart
  int n_ssd = 0;
  double mixed_ratio = 0;
  int n_mixed = 0;
  double remote_ms = 0, remote_ratio = 0, remote_ratio_max = 0;  // served "remote", on the replica
  int n_remote = 0;
  int64_t remote_prompt_tokens = 0, remote_restore_point = 0;  // the first remote request
  uint64_t remote_bytes = 0, remote_wire = 0;  // remote requests: bytes_read, bytes received on the wire
  double remote_gbps = 0, remote_e2e_gbps = 0;
  double ssd_cold_ms = 0, remote_cold_ms = 0;  // the bypass twins of those requests
  int64_t ssd_prompt_tokens = 0, ssd_restore_point = 0;  // the first SSD request
  int64_t prompt_tokens = 0, skipped_tokens = 0;          // bank requests: sum of prompts, of restore_point
  double restore_gbps = 0;        // SSD requests: sum bytes_read / sum lookup (the tier's reads and checks)
  double restore_e2e_gbps = 0;    // SSD requests: sum bytes_read / sum (lookup + restore), composing included
  uint64_t restore_bytes = 0;
  double dd_gbps = 0;
  double restore_vs_dd = 0;
  double dedup_ratio = 0;         // ideal / on disk
  double saving = 0;              // naive / on disk
  double prefill_tps = 0;         // bypass rows: sum prompt tokens / sum prefill time
  double decode_tps = 0;          // bypass rows: sum (generated - 1) / sum (total - ttft)
};

AgentSummary summarize(const AgentResult& result);

// One header line, then one line per row, in run order.
std::string agent_csv(const AgentResult& result);

struct AgentReportContext {
  std::string command;       // the command line that reproduces the run
  std::string model;         // what model: arch, preset or directory
  std::string fingerprint;
  std::string machine;       // CPU, cores
  std::string date;          // UTC
  std::string bank_dir;
  int threads = 0;
  std::string csv_name;      // relative to the report
  std::vector<std::pair<std::string, std::string>> plots;  // (title, file relative to the report)
  std::string plots_note;    // why there are no plots
};

std::string agent_markdown(const AgentResult& result, const AgentWorkloadOptions& options,
                           const AgentReportContext& context);

}  // namespace sb
