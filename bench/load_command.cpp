// statebank bench load: concurrent clients against the batching engine
// (bench/load_workload.h), with a markdown report, a CSV and, when gnuplot is
// installed, a PNG plot (tools/bench/load_plots.gp).
#include <cstdio>
#include <sstream>
#include <thread>

#include "bench/load_workload.h"
#include "bench/command_util.h"
#include "bench/commands.h"
#include "model/model_arg.h"
#include "common/args.h"
#include "engine/step_budget.h"
#include "model/model.h"

namespace sb {

const char* const kLoadUsage =
    "usage: statebank bench load [--preset 0.8b|small|tiny] [--arch qwen3_5] [--model DIR] [--cache-dir DIR]\n"
    "         [--threads 2] [--precision bf16|f32] [--clients 1,2,4,8] [--prompt-tokens 64] [--decode-tokens 48]\n"
    "         [--requests 2] [--rounds 3] [--max-running 8] [--batch-tokens 512] [--itl-ratio 2]\n"
    "         [--long-prompt-tokens 8192] [--long-decoders 4] [--idle-tokens 64] [--long-batch-tokens 512,64]\n"
    "         [--long-itl-ratios 0,2] [--seed 1] [--speculative off|auto|ngram|mtp]\n"
    "         [--report FILE.md] [--csv FILE.csv] [--no-plots]";

namespace {

namespace fs = std::filesystem;

bool valid_count(double v) { return v >= 1 && v <= (1 << 20); }
bool valid_budget(double v) { return v >= 2 && v <= (1 << 20); }

// Empty on success, else why there is no plot.
std::string make_plot(const std::string& csv, const std::string& png) {
  if (!on_path("gnuplot")) return "gnuplot is not installed (apt-get install gnuplot-nox), so no plot was drawn";
  const std::string script = find_plot_script("load_plots.gp");
  if (script.empty()) return "tools/bench/load_plots.gp was not found, so no plot was drawn";
  if (csv.find('\'') != std::string::npos || png.find('\'') != std::string::npos)
    return "a path holds a quote character, so no plot was drawn";
  const std::string cmd = "gnuplot -e " + quote_arg("csv='" + csv + "'; png='" + png + "'") + " " + quote_arg(script) + " 1>&2";
  if (std::system(cmd.c_str()) != 0) return "gnuplot failed (" + cmd + ")";
  return "";
}

}  // namespace

namespace {

// The workload's options from the flags, checked against each other.
Status load_options(const Args& args, LoadOptions* o, int64_t* threads) {
  int64_t requests, rounds, max_running, decoders, seed;
  Status s;
  std::vector<int64_t> clients;
  if (!(s = args.get_int("threads", 2, 1, 256, threads)) ||
      !(s = args.get_int("prompt-tokens", 64, 1, 1 << 20, &o->prompt_tokens)) ||
      !(s = args.get_int("decode-tokens", 48, 1, 1 << 20, &o->decode_tokens)) ||
      !(s = args.get_int("requests", 2, 1, 1000, &requests)) ||
      !(s = args.get_int("rounds", 3, 1, 100, &rounds)) ||
      !(s = args.get_int("max-running", 8, 1, 256, &max_running)) ||
      !(s = args.get_int("batch-tokens", 512, 2, 1 << 20, &o->batch_tokens)) ||
      !(s = args.get_int("long-prompt-tokens", 8192, 1, 1 << 22, &o->long_prompt_tokens)) ||
      !(s = args.get_int("long-decoders", 4, 1, 255, &decoders)) ||
      !(s = args.get_int("idle-tokens", 64, 1, 1 << 20, &o->idle_tokens)) ||
      !(s = args.get_int("seed", 1, 0, INT64_MAX, &seed)) ||
      !(s = args.get_double("itl-ratio", 2.0, &o->itl_ratio)) ||
      !(s = parse_list("clients", args.get("clients", "1,2,4,8"), "integers >= 1", valid_count, &clients)) ||
      !(s = parse_list("long-batch-tokens", args.get("long-batch-tokens", "512"), "integers >= 2", valid_budget,
                       &o->long_batch_tokens)) ||
      !(s = parse_list("long-itl-ratios", args.get("long-itl-ratios", "0,2"),
                       std::string("ratios, each ") + StepBudget::kRatioRule, StepBudget::valid_ratio,
                       &o->long_itl_ratios)))
    return s;
  o->clients.assign(clients.begin(), clients.end());
  o->requests_per_client = static_cast<int>(requests);
  o->rounds = static_cast<int>(rounds);
  o->max_running = static_cast<int>(max_running);
  o->long_decoders = static_cast<int>(decoders);
  o->seed = static_cast<uint64_t>(seed);
  if (o->batch_tokens <= o->max_running) return Status::invalid("--batch-tokens must be more than --max-running");
  if (!StepBudget::valid_ratio(o->itl_ratio))
    return Status::invalid(std::string("--itl-ratio must be ") + StepBudget::kRatioRule);
  for (int64_t b : o->long_batch_tokens)
    if (b <= std::max<int64_t>(o->max_running, o->long_decoders + 1))
      return Status::invalid("each --long-batch-tokens must be more than the sequences that run (" +
                             std::to_string(std::max<int64_t>(o->max_running, o->long_decoders + 1)) + ")");
  const std::string mode = args.get("speculative", "auto");
  if (!parse_speculative_mode(mode, &o->speculative))
    return Status::invalid("--speculative must be one of " + std::string(kSpeculativeModes) + ", not '" + mode + "'");
  o->progress = [](const std::string& line) { std::fprintf(stderr, "statebank bench: %s\n", line.c_str()); };
  return Status::ok();
}

}  // namespace

int bench_load(int argc, char** argv) {
  Args args({"model", "arch", "preset", "cache-dir", "threads", "precision", "weights", "clients", "prompt-tokens", "decode-tokens", "requests", "rounds",
             "max-running", "batch-tokens", "long-prompt-tokens", "long-decoders", "idle-tokens", "long-batch-tokens",
             "itl-ratio", "long-itl-ratios", "seed", "report", "csv", "speculative"},
            {"no-plots", "help"});
  Status s = args.parse(argc, argv);
  if (!s) return fail("bench", s.message() + "\n" + kLoadUsage);
  if (args.has("help")) return print_usage(kLoadUsage);
  if (!args.positional().empty()) return fail("bench", "unexpected argument '" + args.positional()[0] + "'\n" + kLoadUsage);
  LoadOptions o;
  int64_t threads;
  if (!(s = load_options(args, &o, &threads))) return fail("bench", s.message());

  BenchModel bm;
  if (!(s = open_bench_model(args, static_cast<int>(threads), &bm))) return fail("bench", s.to_string());
  const std::string& model_dir = bm.dir;
  const std::string& model_desc = bm.description;
  std::unique_ptr<Model> model = std::move(bm.model);

  const std::string report = args.get("report");
  std::string csv = args.get("csv");
  if (csv.empty() && !report.empty()) csv = fs::path(report).replace_extension(".csv").string();
  std::fprintf(stderr, "statebank bench: load on %s, %lld threads\n", model_dir.c_str(), static_cast<long long>(threads));
  LoadResult result;
  if (!(s = run_load_workload(*model, o, &result))) return fail("bench", s.to_string());

  LoadReportContext c;
  c.command = "tools/statebank.sh bench load";
  for (int i = 1; i < argc; ++i) c.command.append(" ").append(quote_arg(argv[i]));
  c.model = model_desc;
  c.machine = cpu_name() + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores";
  c.date = utc_now();
  c.threads = static_cast<int>(threads);
  c.csv_name = "(no CSV: give --csv or --report)";
  if (!csv.empty()) {
    if (!(s = write_text(csv, load_csv(result)))) return fail("bench", s.to_string());
    c.csv_name = fs::path(csv).filename().string();
    const std::string png = fs::path(report.empty() ? csv : report).replace_extension(".png").string();
    const std::string why = args.has("no-plots") ? "Plots were not drawn (--no-plots)." : make_plot(csv, png);
    if (why.empty()) c.plot_name = fs::path(png).filename().string();
    else c.plots_note = why;
  }
  const std::string md = load_markdown(result, o, c);
  if (report.empty()) {
    std::fputs(md.c_str(), stdout);
  } else {
    if (!(s = write_text(report, md))) return fail("bench", s.to_string());
    std::fprintf(stderr, "statebank bench: wrote %s and %s\n", report.c_str(), csv.c_str());
  }
  return 0;
}

}  // namespace sb
