// statebank bench spec: speculative decoding's decode speed on one client
// (docs/bench/spec.md): the oracle drafter at chosen acceptance rates and
// fixed depths beside the theoretical tokens per step, n-gram drafts on a
// repetitive workload, and auto mode where drafts rarely match. Every run's
// tokens and logprobs are checked against plain decoding's, bit for bit.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "bench/spec_llama.h"
#include "bench/spec_mtp.h"
#include "bench/command_util.h"
#include "bench/commands.h"
#include "common/args.h"
#include "engine/engine.h"
#include "server/protocols/decoding_rules.h"

namespace sb {

const char* const kSpecUsage =
    "usage: statebank bench spec [--preset 0.8b|small|tiny] [--arch qwen3_5] [--model DIR] [--cache-dir DIR]\n"
    "         [--threads 2] [--precision bf16|f32] [--prompt-tokens 64] [--decode-tokens 48] [--reps 2]\n"
    "         [--acceptance 0.5,0.7,0.8,0.9] [--depths 1,2,3,4] [--seed 1] [--report FILE.md] [--csv FILE.csv]\n"
    "         [--mtp-vocab 32768] [--no-plots] [--no-llama] [--llama-bin DIR]";

namespace {

namespace fs = std::filesystem;

struct SpecRun {
  std::string workload, drafter;  // workload: random or repetitive; drafter: off, oracle, ngram, auto
  double acceptance = 0;          // oracle: 1 - its corrupted share
  int depth = 0;                  // oracle: fixed depth; ngram/auto: draft_max (adaptive)
  double tokens_per_s = 0;        // decode (after the first token), best of the reps
  double plain_tokens_per_s = 0;  // the same workload with speculation off, best of the reps
  SpeculativeRecord record;
  bool equal = true;       // every rep equalled plain decoding bit for bit
  double theory() const {  // tokens per step of a fixed-depth draft at this acceptance
    return acceptance >= 1 ? depth + 1.0 : (1 - std::pow(acceptance, depth + 1)) / (1 - acceptance);
  }
};

// One request's decode rate: tokens after the first over the time after the first.
double decode_rate(const Engine& engine, const CompletionRequest& r, CompletionResult* out) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!engine.complete(r, out).is_ok()) return 0;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return (static_cast<double>(out->tokens.size()) - 1) * 1000.0 / std::max(ms - out->ttft_ms, 1e-3);
}

bool same(const CompletionResult& a, const CompletionResult& b) {
  if (a.tokens.size() != b.tokens.size()) return false;
  for (size_t i = 0; i < a.tokens.size(); ++i)
    if (a.tokens[i].token != b.tokens[i].token ||
        std::memcmp(&a.tokens[i].logprob, &b.tokens[i].logprob, sizeof(float)) != 0)
      return false;
  return true;
}

// Runs `run` and plain decoding of the same request `reps` times each,
// alternating, so that a slow spell of the machine falls on both alike.
void measure(const Engine& engine, const CompletionRequest& plain_request, const CompletionResult& plain, int reps,
             const std::function<void(CompletionRequest*)>& set, SpecRun* run) {
  for (int rep = 0; rep < reps; ++rep) {
    CompletionResult p, got;
    run->plain_tokens_per_s = std::max(run->plain_tokens_per_s, decode_rate(engine, plain_request, &p));
    CompletionRequest r = plain_request;
    set(&r);
    run->tokens_per_s = std::max(run->tokens_per_s, decode_rate(engine, r, &got));
    run->equal = run->equal && same(got, plain) && same(p, plain);
    run->record = got.speculative;
  }
  std::fprintf(stderr, "statebank bench: %s %s a=%.2f k=%d: %.2f tokens/s (plain %.2f), %.2f tokens/step, %s\n",
               run->workload.c_str(), run->drafter.c_str(), run->acceptance, run->depth, run->tokens_per_s,
               run->plain_tokens_per_s, run->record.tokens_per_step(), run->equal ? "equal" : "DIFFERENT");
}

CompletionRequest base_request(int64_t prompt_tokens, int64_t decode_tokens, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  CompletionRequest r;
  for (int64_t i = 0; i < prompt_tokens; ++i) r.prompt.push_back(static_cast<int32_t>(rng() % vocab));
  r.max_tokens = decode_tokens;
  r.cache_mode = CacheMode::kBypass;
  r.speculative.mode = SpeculativeMode::kOff;
  return r;
}

constexpr const char* kRepetitive = "repetitive";
constexpr float kRepeatBias = 60.0f;

struct SpecOptions {
  int64_t prompt_tokens = 64, decode_tokens = 48, seed = 1;
  int reps = 2;
  std::vector<double> acceptance;
  std::vector<int64_t> depths;
};

// *repetitive: the repetitive workload's request (llama.cpp's row runs it).
std::vector<SpecRun> run_spec(const Engine& engine, const SpecOptions& o, CompletionRequest* repetitive_out) {
  const int64_t vocab = engine.model().vocab_size();
  std::vector<SpecRun> runs;
  CompletionRequest random = base_request(o.prompt_tokens, o.decode_tokens, vocab, o.seed);
  CompletionResult plain;
  if (Status s = engine.complete(random, &plain); !s) {  // also warms the machine up
    std::fprintf(stderr, "statebank bench: spec: %s\n", s.to_string().c_str());
    return runs;
  }
  std::vector<int32_t> recorded;
  for (const GeneratedToken& g : plain.tokens) recorded.push_back(g.token);
  for (double a : o.acceptance)
    for (int64_t k : o.depths) {
      SpecRun run{"random", "oracle", a, static_cast<int>(k), 0, 0, {}};
      measure(
          engine, random, plain, o.reps,
          [&](CompletionRequest* r) {
            r->speculative = SpeculativeParams{SpeculativeMode::kNgram, static_cast<int>(k), false, {}};
            r->make_drafter = [=] { return std::make_unique<OracleDrafter>(recorded, 1 - a, 7, vocab); };
          },
          &run);
      runs.push_back(run);
    }
  SpecRun automatic{"random", "auto", 0, 4, 0, 0, {}};
  measure(
      engine, random, plain, o.reps, [](CompletionRequest* r) { r->speculative.mode = SpeculativeMode::kAuto; },
      &automatic);
  runs.push_back(automatic);
  // Repetitive: a logit bias towards the prompt's first token makes the
  // random model's output that token over and over, its input repeated as an
  // agent's output repeats its input. It is the only repetition the random
  // model gives: its own greedy output does not fall into a loop (400 tokens
  // of the tiny preset checked), so n-grams rarely predict it; and a bias
  // towards four prompt tokens gives a walk over them that no n-gram predicts
  // either (acceptance 0: drafting paused after a few rejected steps).
  CompletionRequest repetitive = random;
  DecodingRules rules;
  rules.logit_bias.emplace_back(random.prompt[0], kRepeatBias);
  auto shared = std::make_shared<const DecodingRules>(std::move(rules));
  repetitive.make_processor = [shared] { return shared->make(); };
  CompletionResult plain_rep;
  if (Status s = engine.complete(repetitive, &plain_rep); !s) {
    std::fprintf(stderr, "statebank bench: spec: %s\n", s.to_string().c_str());
    return runs;
  }
  SpecRun ngram{kRepetitive, "ngram", 0, 4, 0, 0, {}};
  measure(
      engine, repetitive, plain_rep, o.reps,
      [](CompletionRequest* r) { r->speculative.mode = SpeculativeMode::kNgram; }, &ngram);
  runs.push_back(ngram);
  *repetitive_out = repetitive;
  return runs;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string spec_csv(const std::vector<SpecRun>& runs) {
  std::ostringstream out;
  out << "workload,drafter,acceptance,depth,measured_acceptance,tokens_per_step,theory_tokens_per_step,"
         "tokens_per_s,plain_tokens_per_s,speedup,equal\n";
  for (const SpecRun& r : runs)
    out << r.workload << ',' << r.drafter << ',' << r.acceptance << ',' << r.depth << ',' << r.record.acceptance()
        << ',' << r.record.tokens_per_step() << ',' << (r.drafter == "oracle" ? r.theory() : 0) << ',' << r.tokens_per_s
        << ',' << r.plain_tokens_per_s << ',' << r.tokens_per_s / r.plain_tokens_per_s << ',' << (r.equal ? 1 : 0)
        << '\n';
  return out.str();
}

const SpecRun* find_run(const std::vector<SpecRun>& runs, const std::string& drafter, double a, int k) {
  for (const SpecRun& r : runs)
    if (r.drafter == drafter && std::abs(r.acceptance - a) < 1e-9 && r.depth == k) return &r;
  return nullptr;
}

// llama.cpp's n-gram row beside ours on the own-continuation workload, and its target.
void llama_markdown(const std::vector<SpecRun>& runs, const LlamaSpecRow& llama, std::ostringstream& table,
                    std::ostringstream& targets) {
  const SpecRun* ours = nullptr;
  for (const SpecRun& r : runs)
    if (r.workload == kRepetitive && r.drafter == "ngram") ours = &r;
  if (!ours) return;
  if (!llama.skipped.empty()) {
    table << "| " << kRepetitive << " | llama.cpp ngram-simple | | | " << llama.skipped << " | | | | | | |\n";
    targets << "- n-gram beside llama.cpp's n-gram decoding: " << llama.skipped << "\n";
    return;
  }
  const double ratio = llama.tokens_per_s > 0 ? ours->tokens_per_s / llama.tokens_per_s : 0.0;
  table << "| " << kRepetitive << " | llama.cpp ngram-simple | | 4 (max) | " << fmt("%.2f", llama.acceptance())
        << " | | | " << fmt("%.2f", llama.tokens_per_s) << " | " << fmt("%.2f", llama.plain_tokens_per_s) << " | "
        << fmt("%.2fx", llama.plain_tokens_per_s > 0 ? llama.tokens_per_s / llama.plain_tokens_per_s : 0.0)
        << " | n/a |\n";
  targets << "- n-gram on the repetitive workload: " << fmt("%.2f", ours->tokens_per_s)
          << " tokens/s, llama.cpp's n-gram decoding (`llama-server " << llama.flags << "`, same prompt, weights as "
          << "BF16 GGUF, greedy, " << fmt("%.0f", static_cast<double>(llama.drafted)) << " drafted, "
          << fmt("%.0f", static_cast<double>(llama.accepted)) << " accepted) " << fmt("%.2f", llama.tokens_per_s)
          << " tokens/s: " << fmt("%.2fx", ratio) << " (target at least 1.20x: " << (ratio >= 1.2 ? "met" : "not met")
          << ")\n";
}

std::string spec_markdown(const std::vector<SpecRun>& runs, const LlamaSpecRow& llama, const SpecOptions& o,
                          const std::string& head, const std::string& plot) {
  std::ostringstream llama_row, llama_target;
  llama_markdown(runs, llama, llama_row, llama_target);
  std::ostringstream md;
  md << head << "\n## Decode speed, one client\n\n"
     << "Decode tokens/s after the first token, best of " << o.reps << " runs of " << o.decode_tokens
     << " greedy tokens after a " << o.prompt_tokens
     << "-token prompt, each beside a plain run of the same request (speculation off) in the same rep. Oracle: a "
        "recorded plain run's tokens, each replaced by another with probability 1 - acceptance, at a fixed depth; "
        "theory: (1 - a^(k+1)) / (1 - a) tokens per step. `equal`: every run's tokens and logprobs equal plain "
        "decoding's bit for bit.\n\n"
     << "| workload | drafter | acceptance | depth | measured acceptance | tokens/step | theory | tokens/s | plain "
        "tokens/s | speedup | equal |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const SpecRun& r : runs)
    md << "| " << r.workload << " | " << r.drafter << " | " << (r.drafter == "oracle" ? fmt("%.1f", r.acceptance) : "")
       << " | " << r.depth << (r.drafter == "oracle" ? "" : " (max, adaptive)") << " | "
       << fmt("%.2f", r.record.acceptance()) << " | " << fmt("%.2f", r.record.tokens_per_step()) << " | "
       << (r.drafter == "oracle" ? fmt("%.2f", r.theory()) : "") << " | " << fmt("%.2f", r.tokens_per_s) << " | "
       << fmt("%.2f", r.plain_tokens_per_s) << " | " << fmt("%.2fx", r.tokens_per_s / r.plain_tokens_per_s) << " | "
       << (r.equal ? "yes" : "**no**") << " |\n";
  md << llama_row.str() << "\nRepetitive: the random prompt with a logit bias of +60 towards its first token, so the "
     << "output is that token over and over (the random model's own output does not loop; a bias towards four prompt "
     << "tokens gives a walk over them that no n-gram predicts). llama.cpp's row: the same prompt (token ids), logit "
     << "bias and greedy decode on the same weights, its plain decoding beside it; its acceptance is its own "
     << "draft_n_accepted / draft_n.\n";
  md << "\n## Targets\n\n";
  if (const SpecRun* r = find_run(runs, "oracle", 0.8, 4))
    md << "- oracle, acceptance 0.8, depth 4: " << fmt("%.2fx", r->tokens_per_s / r->plain_tokens_per_s)
       << " plain decoding (target at least 2.20x: "
       << (r->tokens_per_s >= 2.2 * r->plain_tokens_per_s ? "met" : "not met") << ")\n";
  if (const SpecRun* r = find_run(runs, "auto", 0, 4))
    md << "- auto where drafts rarely match (acceptance " << fmt("%.2f", r->record.acceptance())
       << "): " << fmt("%.2fx", r->tokens_per_s / r->plain_tokens_per_s) << " plain decoding (target at least 0.97x: "
       << (r->tokens_per_s >= 0.97 * r->plain_tokens_per_s ? "met" : "not met") << ")\n";
  md << llama_target.str();
  md << "\n" << plot << "\n";
  return md.str();
}

std::string make_spec_plot(const std::string& csv, const std::string& png) {
  if (!on_path("gnuplot")) return "gnuplot is not installed (apt-get install gnuplot-nox), so no plot was drawn.";
  const std::string script = find_plot_script("spec_plots.gp");
  if (script.empty()) return "tools/bench/spec_plots.gp was not found, so no plot was drawn.";
  if (csv.find('\'') != std::string::npos || png.find('\'') != std::string::npos)
    return "a path holds a quote character, so no plot was drawn.";
  const std::string cmd =
      "gnuplot -e " + quote_arg("csv='" + csv + "'; png='" + png + "'") + " " + quote_arg(script) + " 1>&2";
  if (std::system(cmd.c_str()) != 0) return "gnuplot failed (" + cmd + ").";
  return "";
}

Status parse_spec_options(const Args& args, SpecOptions* o, int64_t* threads) {
  Status s;
  int64_t reps;
  if (!(s = args.get_int("threads", 2, 1, 256, threads)) ||
      !(s = args.get_int("prompt-tokens", 64, 1, 1 << 20, &o->prompt_tokens)) ||
      !(s = args.get_int("decode-tokens", 48, 2, 1 << 20, &o->decode_tokens)) ||
      !(s = args.get_int("reps", 2, 1, 100, &reps)) || !(s = args.get_int("seed", 1, 0, INT64_MAX, &o->seed)) ||
      !(s = parse_list(
            "depths", args.get("depths", "1,2,3,4"), "integers in 1..16",
            [](double k) { return k >= 1 && k <= kMaxDraftTokens; }, &o->depths)) ||
      !(s = parse_list(
            "acceptance", args.get("acceptance", "0.5,0.7,0.8,0.9"), "rates in [0, 1]",
            [](double a) { return a >= 0 && a <= 1; }, &o->acceptance)))
    return s;
  o->reps = static_cast<int>(reps);
  return Status::ok();
}

// The MTP head's section (the auto row above drafted with it): the cost of a
// draft token and of the head's rows, and auto beside plain decoding on the
// same checkpoint loaded without its head (`serve --speculative off`), the
// two alternating, since the head's rows cost every step of the former.
Status mtp_markdown(const Args& args, const SpecOptions& o, int threads, const Engine& engine, std::string* out) {
  const Model& model = engine.model();
  MtpCost cost;
  const CompletionRequest plain = base_request(o.prompt_tokens, o.decode_tokens, model.vocab_size(), o.seed);
  BenchModel headless;
  SB_RETURN_IF_ERROR(open_bench_model(args, threads, &headless, /*mtp_head=*/false));
  SB_RETURN_IF_ERROR(measure_mtp_cost(model, *headless.model, plain.prompt, static_cast<int>(o.decode_tokens), &cost));
  std::unique_ptr<Engine> off;
  SB_RETURN_IF_ERROR(Engine::create(*headless.model, nullptr, EngineOptions{}, &off));
  CompletionRequest automatic = plain;
  automatic.speculative.mode = SpeculativeMode::kAuto;
  double auto_tps = 0, off_tps = 0;
  for (int rep = 0; rep < o.reps; ++rep) {
    CompletionResult r;
    off_tps = std::max(off_tps, decode_rate(*off, plain, &r));
    auto_tps = std::max(auto_tps, decode_rate(engine, automatic, &r));
  }
  const std::string vocab = args.get("mtp-vocab", "32768");
  *out = "\n## MTP head\n\nThe checkpoint has an MTP head, so the auto row drafted with it. Draft vocabulary: ";
  *out += "the first " + vocab + " token ids (`--mtp-vocab`; 0: all).\n\n" + mtp_cost_lines(cost);
  const double ratio = off_tps > 0 ? auto_tps / off_tps : 0;
  *out += "- auto (the head's rows in every step, drafts paused below break-even): " + fmt("%.2f", auto_tps) +
          " tokens/s beside " + fmt("%.2f", off_tps) +
          " tokens/s of plain decoding with the head unloaded (`serve --speculative off`), alternating, best of " +
          std::to_string(o.reps) + ": " + fmt("%.2fx", ratio) +
          " (target at least 0.97x: " + (ratio >= 0.97 ? "met" : "not met") + ")\n";
  return Status::ok();
}

}  // namespace

int bench_spec(int argc, char** argv) {
  Args args({"model", "arch", "preset", "cache-dir", "threads", "precision", "prompt-tokens", "decode-tokens", "reps",
             "acceptance", "depths", "seed", "report", "csv", "mtp-vocab", "llama-bin"},
            {"no-plots", "no-llama", "help"});
  Status s = args.parse(argc, argv);
  if (!s) return fail("bench", s.message() + "\n" + kSpecUsage);
  if (args.has("help")) return print_usage(kSpecUsage);
  if (!args.positional().empty())
    return fail("bench", "unexpected argument '" + args.positional()[0] + "'\n" + kSpecUsage);
  SpecOptions o;
  int64_t threads;
  if (!(s = parse_spec_options(args, &o, &threads))) return fail("bench", s.message());
  BenchModel bm;
  if (!(s = open_bench_model(args, static_cast<int>(threads), &bm))) return fail("bench", s.to_string());
  std::unique_ptr<Engine> engine;
  EngineOptions eo;
  if (!(s = Engine::create(*bm.model, nullptr, eo, &engine))) return fail("bench", s.to_string());
  CompletionRequest repetitive;
  const std::vector<SpecRun> runs = run_spec(*engine, o, &repetitive);
  if (runs.empty()) return fail("bench", "spec: the plain run failed (above)");
  std::string mtp_lines;
  if (bm.model->has_mtp() && !(s = mtp_markdown(args, o, static_cast<int>(threads), *engine, &mtp_lines)))
    return fail("bench", s.to_string());
  LlamaSpecRow llama;
  if (args.has("no-llama")) {
    llama.skipped = "skipped (--no-llama)";
  } else if (!repetitive.prompt.empty()) {
    engine.reset();  // its threads would compete with llama-server's
    bm.model.reset();
    llama = run_llama_ngram(LlamaSpecJob{args.get("llama-bin", default_llama_bin()),
                                         bm.dir,
                                         (fs::path(bm.cache_base) / "gguf").string(),
                                         repetitive.prompt,
                                         {{repetitive.prompt[0], kRepeatBias}},
                                         o.decode_tokens,
                                         static_cast<int>(threads),
                                         o.reps,
                                         4});
  }

  std::string command = "tools/statebank.sh bench spec";
  for (int i = 1; i < argc; ++i) command.append(" ").append(quote_arg(argv[i]));
  const std::string head = "# Speculative decoding\n\nGenerated by `" + command + "` on " + utc_now() +
                           ".\n\n- model: " + bm.description + "\n- machine: " + cpu_name() + ", " +
                           std::to_string(std::thread::hardware_concurrency()) + " cores; " + std::to_string(threads) +
                           " runtime threads; shared with other work, so the numbers are indicative\n";
  const std::string report = args.get("report");
  std::string csv = args.get("csv");
  if (csv.empty() && !report.empty()) csv = fs::path(report).replace_extension(".csv").string();
  std::string plot = "(no CSV: give --csv or --report, so no plot)";
  if (!csv.empty()) {
    if (!(s = write_text(csv, spec_csv(runs)))) return fail("bench", s.to_string());
    const std::string png = fs::path(report.empty() ? csv : report).replace_extension(".png").string();
    const std::string why = args.has("no-plots") ? "Plots were not drawn (--no-plots)." : make_spec_plot(csv, png);
    plot = why.empty() ? "![tokens per step and speed-up by depth](" + fs::path(png).filename().string() + ")" : why;
  }
  std::string md = spec_markdown(runs, llama, o, head, plot) + mtp_lines;
  if (report.empty()) {
    std::fputs(md.c_str(), stdout);
  } else if (!(s = write_text(report, md))) {
    return fail("bench", s.to_string());
  }
  for (const SpecRun& r : runs)
    if (!r.equal) return fail("bench", "a speculative run differed from plain decoding (" + r.drafter + ")");
  return 0;
}

}  // namespace sb
