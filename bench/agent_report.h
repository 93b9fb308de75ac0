// The agent workload's outputs: the headline figures computed from one run
// (bench/agent_workload.h), the per-request CSV and the markdown report. The
// figures' definitions (the cold twin, ratios, restore read throughput against
// dd, naive and ideal bytes, the dedup ratio, the remote tier's figures) are
// written into the report and in docs/development.md, "The agent workload's
// figures".
// Pure functions, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "bench/agent_workload.h"

namespace sb {

// The requests served from one tier alone: SSD after the restart, Redis on
// the replica.
struct ServedFrom {
  int n = 0;
  double ms = 0, ratio = 0, ratio_max = 0;  // ttft: mean, mean over the twin's, worst ratio
  double cold_ms = 0;                       // the bypass twins' mean ttft
  int64_t prompt_tokens = 0, restore_point = 0;  // of the first such request
  uint64_t bytes = 0;                       // sum of bytes_read
  uint64_t wire = 0;                        // sum of bytes received from the remote tier
  double gbps = 0;                          // bytes / sum of lookup (the tier's reads and checks)
  double e2e_gbps = 0;                      // bytes / sum of (lookup + restore), composing included
};

struct AgentSummary {
  int requests = 0;               // bank requests (each has a bypass twin)
  int equal = 0;                  // bank requests equal to their twin bit for bit
  double cold_first_ms = 0;       // mean bypass ttft, turn 0
  double cold_later_ms = 0;       // mean bypass ttft, turns >= 1
  int n_cold_first = 0, n_cold_later = 0;
  double populate_ratio = 0;      // the very first bank request (empty bank) / its twin
  double ram_ms = 0, ram_ratio = 0, ram_ratio_max = 0;
  int n_ram = 0;
  ServedFrom ssd;                 // served "ssd", after the restart
  ServedFrom remote;              // served "remote", on the replica
  double mixed_ratio = 0;
  int n_mixed = 0;
  int64_t prompt_tokens = 0, skipped_tokens = 0;          // bank requests: sum of prompts, of restore_point
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
