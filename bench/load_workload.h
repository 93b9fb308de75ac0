// The load benchmark (`statebank bench load`): concurrent clients against
// one batching engine (engine/engine.h) with the bank bypassed, so it
// measures continuous batching alone (the phases in full: docs/development.md,
// "The load benchmark's phases"):
//  1. per client count, clients sending requests one after another, the sweep
//     repeated `rounds` times so a slow spell falls on every count alike:
//     aggregate decode tokens/s (in decode-only steps) and tokens/s over
//     the wall time, TTFT and inter-token latency p50/p99;
//  2. per step budget and latency ratio, `long_decoders` endless decoders'
//     inter-token latency idle and while a long prompt is prefilled.
// Timings are wall clock (steady_clock): run it on a quiet machine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/speculation.h"
#include "model/model.h"

namespace sb {

struct LoadOptions {
  std::vector<int> clients = {1, 2, 4, 8};
  int64_t prompt_tokens = 64;
  int64_t decode_tokens = 48;
  int requests_per_client = 2;
  // One round's 1-client run was 96 tokens (7 s): one slow moment in it
  // moved the 8-client ratio between 2.5x and 4.3x from run to run.
  int rounds = 3;
  int max_running = 8;
  int64_t batch_tokens = 512;
  double itl_ratio = 2.0;
  SpeculativeMode speculative = SpeculativeMode::kAuto;  // the engine's default, as `serve` runs
  int64_t long_prompt_tokens = 8192;
  int long_decoders = 4;
  // 64 tokens from each of 4 decoders give about 250 idle gaps, so that the
  // idle p99 is a percentile and not simply the largest of about 60 gaps (16
  // tokens), which moved the idle p99 between 91 and 190 ms from one run to
  // the next.
  int64_t idle_tokens = 64;
  std::vector<int64_t> long_batch_tokens = {512};  // step budgets of phase 2
  std::vector<double> long_itl_ratios = {0, 2};     // and latency ratios (0: tokens alone)
  uint64_t seed = 1;
  std::function<void(const std::string&)> progress;
};

struct Percentiles {
  size_t n = 0;
  double p50 = 0, p99 = 0, mean = 0;  // milliseconds
};
Percentiles percentiles(std::vector<double> values);

// One client count: a single run (`round` from 1), or all rounds pooled
// (`round` 0).
struct ClientsRun {
  int clients = 0;
  int round = 0;
  double wall_s = 0;
  int64_t tokens = 0;
  double tokens_per_s = 0;  // every token over the wall time, the prompts' prefill included
  // Decode throughput, what the batch size changes: the tokens drawn in the
  // engine's decode-only steps over those steps' wall time (EngineStats).
  // The wall time above also holds every prompt's prefill, 8 of them for 8
  // clients and one for one, and the decode steps a prompt's rows slowed, so
  // its ratio mixes prefill speed into the batching ratio.
  int64_t decode_tokens = 0;
  double decode_s = 0;
  double decode_tokens_per_s = 0;
  Percentiles ttft_ms, itl_ms;
  uint64_t peak_batch = 0;
  std::vector<double> ttft_samples, itl_samples;  // milliseconds
};

struct LongPrefillRun {
  int64_t batch_tokens = 0;
  double itl_ratio = 0;
  int decoders = 0;
  Percentiles idle_itl_ms, during_itl_ms;
  double prefill_s = 0;  // the long request's time to first token
};

struct LoadResult {
  std::vector<ClientsRun> clients;  // pooled over the rounds, in the order of LoadOptions::clients
  std::vector<ClientsRun> rounds;   // every run, round by round
  std::vector<LongPrefillRun> long_prefill;
  double wall_s = 0;
};

Status run_load_workload(const Model& model, const LoadOptions& options, LoadResult* out);

// Markdown report and CSV (a row per client count, pooled, then one per
// round and client count, then one per long-prefill run).
struct LoadReportContext {
  std::string command, model, machine, date, csv_name, plot_name, plots_note;
  int threads = 0;
};
std::string load_markdown(const LoadResult& result, const LoadOptions& options, const LoadReportContext& context);
std::string load_csv(const LoadResult& result);

}  // namespace sb
