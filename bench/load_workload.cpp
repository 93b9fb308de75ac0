#include "bench/load_workload.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "bench/report_text.h"
#include "engine/engine.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}


std::vector<int32_t> random_prompt(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(std::min<int64_t>(vocab, 151643) - 1));
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = d(rng);
  return p;
}

// The token times of one request, as on_token saw them (the step thread).
struct Timeline {
  Clock::time_point submitted;
  std::vector<Clock::time_point> tokens;  // guarded by mu
  std::mutex mu;
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return tokens.size();
  }
};

CompletionRequest request_for(std::vector<int32_t> prompt, int64_t max_tokens, Timeline* timeline,
                              const std::atomic<bool>* stop) {
  CompletionRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.cache_mode = CacheMode::kBypass;
  r.on_token = [timeline](const GeneratedToken&) {
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lock(timeline->mu);
    timeline->tokens.push_back(now);
    return true;
  };
  if (stop) r.cancelled = [stop] { return stop->load(); };
  return r;
}

std::unique_ptr<Engine> make_engine(const Model& model, int max_running, int64_t batch_tokens, double itl_ratio,
                                    SpeculativeMode speculative, Status* s) {
  EngineOptions eo;
  eo.speculative = speculative;
  eo.block_tokens = 256;
  eo.max_running = max_running;
  eo.batch_tokens = batch_tokens;
  eo.itl_ratio = itl_ratio;
  std::unique_ptr<Engine> engine;
  *s = Engine::create(model, nullptr, eo, &engine);
  return engine;
}

Status run_clients(const Model& model, const LoadOptions& o, int clients, int round, ClientsRun* out) {
  Status s;
  auto engine = make_engine(model, o.max_running, o.batch_tokens, o.itl_ratio, o.speculative, &s);
  SB_RETURN_IF_ERROR(s);
  const int n = clients * o.requests_per_client;
  std::vector<std::unique_ptr<Timeline>> timelines;
  for (int i = 0; i < n; ++i) timelines.push_back(std::make_unique<Timeline>());
  std::vector<Status> errors(static_cast<size_t>(clients));
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(round) * 7919 + static_cast<uint64_t>(clients) * 101 +
                          static_cast<uint64_t>(c));
      for (int r = 0; r < o.requests_per_client; ++r) {
        Timeline* t = timelines[static_cast<size_t>(c * o.requests_per_client + r)].get();
        t->submitted = Clock::now();
        CompletionResult result;
        const Status st = engine->complete(
            request_for(random_prompt(rng, o.prompt_tokens, model.vocab_size()), o.decode_tokens, t, nullptr), &result);
        if (!st) errors[static_cast<size_t>(c)] = st;
      }
    });
  for (auto& t : threads) t.join();
  const auto end = Clock::now();
  for (const Status& e : errors) SB_RETURN_IF_ERROR(e);
  out->clients = clients;
  out->round = round;
  out->wall_s = ms_between(start, end) / 1000.0;
  for (const auto& t : timelines) {
    out->tokens += static_cast<int64_t>(t->tokens.size());
    if (t->tokens.empty()) continue;
    out->ttft_samples.push_back(ms_between(t->submitted, t->tokens[0]));
    for (size_t i = 1; i < t->tokens.size(); ++i) out->itl_samples.push_back(ms_between(t->tokens[i - 1], t->tokens[i]));
  }
  out->tokens_per_s = static_cast<double>(out->tokens) / out->wall_s;
  const EngineStats stats = engine->stats();
  out->decode_tokens = static_cast<int64_t>(stats.decode_only_tokens);
  out->decode_s = stats.decode_only_ms / 1000.0;
  out->decode_tokens_per_s = out->decode_s > 0 ? static_cast<double>(out->decode_tokens) / out->decode_s : 0;
  out->ttft_ms = percentiles(out->ttft_samples);
  out->itl_ms = percentiles(out->itl_samples);
  out->peak_batch = engine->stats().peak_batch;
  return Status::ok();
}

// The runs of one client count, all rounds together.
ClientsRun pooled(const std::vector<ClientsRun>& runs, int clients) {
  ClientsRun all;
  all.clients = clients;
  for (const ClientsRun& r : runs) {
    if (r.clients != clients) continue;
    all.wall_s += r.wall_s;
    all.tokens += r.tokens;
    all.decode_tokens += r.decode_tokens;
    all.decode_s += r.decode_s;
    all.peak_batch = std::max(all.peak_batch, r.peak_batch);
    all.ttft_samples.insert(all.ttft_samples.end(), r.ttft_samples.begin(), r.ttft_samples.end());
    all.itl_samples.insert(all.itl_samples.end(), r.itl_samples.begin(), r.itl_samples.end());
  }
  all.tokens_per_s = all.wall_s > 0 ? static_cast<double>(all.tokens) / all.wall_s : 0;
  all.decode_tokens_per_s = all.decode_s > 0 ? static_cast<double>(all.decode_tokens) / all.decode_s : 0;
  all.ttft_ms = percentiles(all.ttft_samples);
  all.itl_ms = percentiles(all.itl_samples);
  return all;
}

Status run_long_prefill(const Model& model, const LoadOptions& o, int64_t batch_tokens, double itl_ratio,
                        LongPrefillRun* out) {
  Status s;
  const int max_running = std::max(o.max_running, o.long_decoders + 1);
  auto engine = make_engine(model, max_running, batch_tokens, itl_ratio, o.speculative, &s);
  SB_RETURN_IF_ERROR(s);
  std::mt19937_64 rng(o.seed * 7919 + static_cast<uint64_t>(batch_tokens));
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Timeline>> decoders;
  std::vector<std::thread> threads;
  std::vector<Status> errors(static_cast<size_t>(o.long_decoders));
  for (int d = 0; d < o.long_decoders; ++d) {
    decoders.push_back(std::make_unique<Timeline>());
    Timeline* t = decoders.back().get();
    auto prompt = random_prompt(rng, o.prompt_tokens, model.vocab_size());
    threads.emplace_back([&, t, d, prompt = std::move(prompt)]() mutable {
      t->submitted = Clock::now();
      CompletionResult result;
      errors[static_cast<size_t>(d)] =
          engine->complete(request_for(std::move(prompt), int64_t{1} << 40, t, &stop), &result);
    });
  }
  auto each_has = [&](size_t k) {
    return std::all_of(decoders.begin(), decoders.end(), [&](const auto& t) { return t->count() >= k; });
  };
  // Idle: every decoder past its first tokens, then a window of idle_tokens each.
  while (!each_has(3)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto idle_from = Clock::now();
  size_t base = 0;
  for (const auto& t : decoders) base = std::max(base, t->count());
  while (!each_has(base + static_cast<size_t>(o.idle_tokens))) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto idle_to = Clock::now();

  Timeline long_timeline;
  long_timeline.submitted = Clock::now();
  CompletionResult long_result;
  const Status long_status = engine->complete(
      request_for(random_prompt(rng, o.long_prompt_tokens, model.vocab_size()), 1, &long_timeline, nullptr), &long_result);
  // A few more decode steps, so the gap that ends after the first token is in.
  const size_t after = decoders[0]->count() + 2;
  while (decoders[0]->count() < after) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop = true;
  for (auto& t : threads) t.join();
  SB_RETURN_IF_ERROR(long_status);
  for (const Status& e : errors) SB_RETURN_IF_ERROR(e);
  if (long_timeline.tokens.empty()) return Status::internal("the long request produced no token");
  const auto long_first = long_timeline.tokens[0];

  std::vector<double> idle, during;
  for (const auto& t : decoders) {
    for (size_t i = 1; i < t->tokens.size(); ++i) {
      const auto a = t->tokens[i - 1], b = t->tokens[i];
      if (a >= idle_from && b <= idle_to) idle.push_back(ms_between(a, b));
      if (b > long_timeline.submitted && b <= long_first) during.push_back(ms_between(a, b));
    }
  }
  out->batch_tokens = batch_tokens;
  out->itl_ratio = itl_ratio;
  out->decoders = o.long_decoders;
  out->idle_itl_ms = percentiles(idle);
  out->during_itl_ms = percentiles(during);
  out->prefill_s = ms_between(long_timeline.submitted, long_first) / 1000.0;
  return Status::ok();
}

}  // namespace

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  // Nearest rank.
  auto rank = [&](double q) {
    const auto i = static_cast<size_t>(std::max(1.0, std::ceil(q * static_cast<double>(v.size()))) - 1);
    return v[std::min(i, v.size() - 1)];
  };
  p.p50 = rank(0.50);
  p.p99 = rank(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  return p;
}

Status run_load_workload(const Model& model, const LoadOptions& o, LoadResult* out) {
  const auto start = Clock::now();
  auto say = [&](const std::string& m) {
    if (o.progress) o.progress(m);
  };
  // Warm the weights into the page cache and the allocator.
  {
    ClientsRun warm;
    LoadOptions w = o;
    w.requests_per_client = 1;
    w.decode_tokens = 2;
    SB_RETURN_IF_ERROR(run_clients(model, w, 1, 0, &warm));
  }
  for (int round = 1; round <= o.rounds; ++round)
    for (int c : o.clients) {
      ClientsRun run;
      SB_RETURN_IF_ERROR(run_clients(model, o, c, round, &run));
      say(fmt("round %d, %d clients: %.2f decode tokens/s (%.2f tokens/s over the wall time), TTFT p50 %.0f ms p99 "
              "%.0f ms, ITL p50 %.0f ms p99 %.0f ms",
              round, c, run.decode_tokens_per_s, run.tokens_per_s, run.ttft_ms.p50, run.ttft_ms.p99, run.itl_ms.p50,
              run.itl_ms.p99));
      out->rounds.push_back(std::move(run));
    }
  for (int c : o.clients) out->clients.push_back(pooled(out->rounds, c));
  for (int64_t b : o.long_batch_tokens)
    for (double r : o.long_itl_ratios) {
      LongPrefillRun run;
      SB_RETURN_IF_ERROR(run_long_prefill(model, o, b, r, &run));
      say(fmt("batch tokens %lld, itl ratio %g: ITL idle p50 %.0f p99 %.0f ms; during a %lld-token prefill p50 %.0f "
              "p99 %.0f ms (%.1fx); prefill %.1f s",
              static_cast<long long>(b), r, run.idle_itl_ms.p50, run.idle_itl_ms.p99,
              static_cast<long long>(o.long_prompt_tokens), run.during_itl_ms.p50, run.during_itl_ms.p99,
              run.idle_itl_ms.p99 > 0 ? run.during_itl_ms.p99 / run.idle_itl_ms.p99 : 0.0, run.prefill_s));
      out->long_prefill.push_back(run);
    }
  out->wall_s = ms_between(start, Clock::now()) / 1000.0;
  return Status::ok();
}

std::string load_csv(const LoadResult& r) {
  std::string s =
      "phase,clients,batch_tokens,itl_ratio,tokens,wall_s,tokens_per_s,ttft_p50_ms,ttft_p99_ms,itl_p50_ms,itl_p99_ms,"
      "idle_itl_p50_ms,idle_itl_p99_ms,prefill_s,round,decode_tokens,decode_s,decode_tokens_per_s\n";
  auto row = [&](const char* phase, const ClientsRun& c) {
    s += fmt("%s,%d,,,%lld,%.3f,%.3f,%.1f,%.1f,%.1f,%.1f,,,,%d,%lld,%.3f,%.3f\n", phase, c.clients,
             static_cast<long long>(c.tokens), c.wall_s, c.tokens_per_s, c.ttft_ms.p50, c.ttft_ms.p99, c.itl_ms.p50,
             c.itl_ms.p99, c.round, static_cast<long long>(c.decode_tokens), c.decode_s, c.decode_tokens_per_s);
  };
  for (const auto& c : r.clients) row("clients", c);
  for (const auto& c : r.rounds) row("clients_round", c);
  for (const auto& l : r.long_prefill)
    s += fmt("long_prefill,%d,%lld,%g,,,,,,%.1f,%.1f,%.1f,%.1f,%.2f,,,,\n", l.decoders,
             static_cast<long long>(l.batch_tokens), l.itl_ratio,
             l.during_itl_ms.p50, l.during_itl_ms.p99, l.idle_itl_ms.p50, l.idle_itl_ms.p99, l.prefill_s);
  return s;
}

std::string load_markdown(const LoadResult& r, const LoadOptions& o, const LoadReportContext& c) {
  std::string md = "# Load: continuous batching\n\n";
  md += "Generated by `" + c.command + "` on " + c.date + ".\n\n";
  md += "- model: " + c.model + "\n";
  md += fmt("- machine: %s; %d runtime threads\n", c.machine.c_str(), c.threads);
  md += fmt("- engine: --max-running %d, --batch-tokens %lld, --itl-ratio %g; bank bypassed (batching alone)\n",
            o.max_running, static_cast<long long>(o.batch_tokens), o.itl_ratio);
  md += fmt("- clients: each sends %d requests one after another, a distinct %lld-token prompt and %lld greedy "
            "decode tokens each; the sweep over the client counts runs %d times (rounds), one count after the other\n",
            o.requests_per_client, static_cast<long long>(o.prompt_tokens), static_cast<long long>(o.decode_tokens),
            o.rounds);
  md += fmt("- total wall time %.0f s; latencies are wall clock, percentiles by nearest rank\n\n", r.wall_s);

  md += "## Throughput and latency by concurrent clients\n\n";
  md += "All rounds together, percentiles of every round's samples. Decode tokens/s: the tokens drawn in the "
        "engine's decode-only steps (no prompt rows in them) over those steps' wall time, what the batch size "
        "changes. Wall tokens/s: every token over the wall time, which also holds every prompt's prefill (one per "
        "request, so 8 times as many with 8 clients) and the decode steps slowed by a prompt prefilled beside them. "
        "Each round's ratio is its run over the same round's 1-client run.\n\n";
  md += "| clients | decode tokens/s (aggregate) | vs 1 client | each round vs 1 | wall tokens/s | vs 1 client | "
        "TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | most sequences in one step |\n"
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  // Ratios are to the 1-client run wherever the sweep has it; none without one.
  const auto one_run =
      std::find_if(r.clients.begin(), r.clients.end(), [](const ClientsRun& x) { return x.clients == 1; });
  const double one = one_run != r.clients.end() ? one_run->decode_tokens_per_s : 0;
  const double one_wall = one_run != r.clients.end() ? one_run->tokens_per_s : 0;
  // Round k's ratio for `clients`: its run over round k's 1-client run.
  auto per_round = [&](int clients) {
    std::string text;
    for (const ClientsRun& x : r.rounds) {
      if (x.clients != clients) continue;
      for (const ClientsRun& base : r.rounds)
        if (base.round == x.round && base.clients == 1 && base.decode_tokens_per_s > 0)
          text += fmt("%s%.2fx", text.empty() ? "" : ", ", x.decode_tokens_per_s / base.decode_tokens_per_s);
    }
    return text.empty() ? std::string("-") : text;
  };
  for (const auto& x : r.clients)
    md += fmt("| %d | %.2f | %s | %s | %.2f | %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %llu |\n", x.clients,
              x.decode_tokens_per_s, one > 0 ? fmt("%.2fx", x.decode_tokens_per_s / one).c_str() : "-",
              per_round(x.clients).c_str(), x.tokens_per_s,
              one_wall > 0 ? fmt("%.2fx", x.tokens_per_s / one_wall).c_str() : "-", x.ttft_ms.p50, x.ttft_ms.p99,
              x.itl_ms.p50, x.itl_ms.p99, static_cast<unsigned long long>(x.peak_batch));
  if (one > 0) {
    const auto best = std::max_element(r.clients.begin(), r.clients.end(),
                                       [](const auto& a, const auto& b) { return a.clients < b.clients; });
    const double ratio = best->decode_tokens_per_s / one;
    md += fmt("\nTarget: %d clients reach at least 4x the aggregate decode throughput of one: %.2fx, %s (over the "
              "wall time, the prompts' prefill included: %.2fx).\n",
              best->clients, ratio, ratio >= 4.0 ? "met" : "**not met**",
              one_wall > 0 ? best->tokens_per_s / one_wall : 0.0);
  }
  md += fmt("\n## Running decodes while a prompt of %lld tokens is prefilled\n\n", static_cast<long long>(o.long_prompt_tokens));
  md += fmt("%d clients decode; after an idle window of %lld tokens each, one request with a prompt of %lld tokens "
            "arrives. ITL during = the decoders' gaps that end between its arrival and its first token.\n\n",
            o.long_decoders, static_cast<long long>(o.idle_tokens), static_cast<long long>(o.long_prompt_tokens));
  md += "| --batch-tokens | --itl-ratio | ITL idle p50 | ITL idle p99 | ITL during p50 | ITL during p99 | p99 during / idle | "
        "long prompt's TTFT |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& l : r.long_prefill) {
    const double ratio = l.idle_itl_ms.p99 > 0 ? l.during_itl_ms.p99 / l.idle_itl_ms.p99 : 0;
    md += fmt("| %lld | %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %.2fx %s | %.1f s |\n",
              static_cast<long long>(l.batch_tokens), l.itl_ratio > 0 ? fmt("%g", l.itl_ratio).c_str() : "0 (off)",
              l.idle_itl_ms.p50, l.idle_itl_ms.p99, l.during_itl_ms.p50,
              l.during_itl_ms.p99, ratio, ratio <= 3.0 ? "(<= 3x)" : "(> 3x)", l.prefill_s);
  }
  md += "\nTarget: p99 inter-token latency during the long prefill at most 3 times the idle one. A step runs "
        "every running decode plus prefill chunks up to --batch-tokens in all and, with --itl-ratio r > 0, only "
        "as many prefill rows as fit in about r - 1 decode-only steps' time (measured as the loop runs; a prompt's "
        "first 64-token chunk runs whole), so a step beside running decodes takes about r times a decode-only one. "
        "Either budget sets the trade-off: "
        "smoother decodes, or a faster first token for the long prompt.\n";
  if (!c.plot_name.empty()) md += "\n![throughput and latency by clients](" + c.plot_name + ")\n";
  if (!c.plots_note.empty()) md += "\n" + c.plots_note + "\n";
  md += "\nRaw numbers: [" + c.csv_name + "](" + c.csv_name + "). The same clients over HTTP against `statebank "
        "serve` and llama.cpp's `llama-server -np 8` side by side, on the same weights: `bench/compare_llama_load.sh "
        "--out docs/bench` writes [load-llama.md](load-llama.md).\n";
  return md;
}

}  // namespace sb
