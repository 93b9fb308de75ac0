// statebank bench agent: the agent workload (bench/agent_workload.h) on a
// generated or given checkpoint, with a markdown report, a per-request CSV
// and, when gnuplot is installed, PNG plots (tools/bench/agent_plots.gp).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "bank/remote/redis_connection.h"
#include "bench/agent_report.h"
#include "bench/agent_workload.h"
#include "bench/command_util.h"
#include "bench/commands.h"
#include "model/model_arg.h"
#include "common/args.h"
#include "model/model.h"

namespace sb {

const char* const kAgentUsage =
    "usage: statebank bench agent [--preset 0.8b|small|tiny] [--arch qwen3_5] [--model DIR] [--cache-dir DIR]\n"
    "         [--prefix-tokens 8192] [--project-tokens 1024] [--message-tokens 40] [--reply-tokens 32]\n"
    "         [--projects 3] [--turns 2] [--turns-after 1] [--block-tokens 256] [--snapshot-every 2048]\n"
    "         [--threads 2] [--precision bf16|f32] [--ram-bytes 8G] [--seed 1] [--work-dir DIR] [--keep-bank]\n"
    "         [--report FILE.md] [--csv FILE.csv] [--plot-script FILE] [--no-plots]\n"
    "         [--remote redis://HOST:PORT[/DB] [--remote-password-file FILE] [--remote-timeout-ms 5000]]";

namespace {

namespace fs = std::filesystem;

// Empty on success, else why there are no plots.
std::string make_plots(const std::string& script, const std::string& csv, const std::string& ttft_png,
                       const std::string& bytes_png) {
  if (!on_path("gnuplot")) return "gnuplot is not installed (apt-get install gnuplot-nox), so no plots were drawn";
  if (script.empty()) return "tools/bench/agent_plots.gp was not found, so no plots were drawn";
  for (const auto& p : {csv, ttft_png, bytes_png})
    if (p.find('\'') != std::string::npos || p.find('"') != std::string::npos)
      return "a path holds a quote character, so no plots were drawn";
  const std::string vars = "csv='" + csv + "'; ttft_png='" + ttft_png + "'; bytes_png='" + bytes_png + "'";
  const std::string cmd = "gnuplot -e " + quote_arg(vars) + " " + quote_arg(script) + " 1>&2";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) return "gnuplot failed (" + cmd + ")";
  return "";
}

// The workload's options from the flags.
Status agent_options(const Args& args, AgentWorkloadOptions* o, int64_t* threads) {
  int64_t projects, turns, turns_after, block, seed, remote_timeout;
  Status s;
  if (!(s = args.get_int("prefix-tokens", 8192, 1, 1 << 24, &o->prefix_tokens)) ||
      !(s = args.get_int("project-tokens", 1024, 0, 1 << 24, &o->project_tokens)) ||
      !(s = args.get_int("message-tokens", 40, 1, 1 << 20, &o->message_tokens)) ||
      !(s = args.get_int("reply-tokens", 32, 1, 1 << 16, &o->reply_tokens)) ||
      !(s = args.get_int("projects", 3, 1, 1000, &projects)) || !(s = args.get_int("turns", 2, 1, 1000, &turns)) ||
      !(s = args.get_int("turns-after", 1, 0, 1000, &turns_after)) ||
      !(s = args.get_int("block-tokens", 256, 64, 1 << 20, &block)) ||
      !(s = args.get_int("snapshot-every", 2048, 0, 1 << 30, &o->snapshot_every)) ||
      !(s = args.get_int("threads", 2, 1, 256, threads)) || !(s = args.get_int("seed", 1, 0, INT64_MAX, &seed)) ||
      !(s = args.get_size("ram-bytes", 8ull << 30, &o->ram_bytes)) ||
      !(s = args.get_int("remote-timeout-ms", 5000, 1, 600000, &remote_timeout)))
    return s;
  if (args.has("remote")) {
    o->remote_url = args.get("remote");
    RedisAddress address;
    if (!(s = parse_redis_url(o->remote_url, &address))) return Status::invalid("--remote: " + s.message());
    if (args.has("remote-password-file") &&
        !(s = read_secret_file("--remote-password-file", args.get("remote-password-file"), &o->remote_password)))
      return s;
    o->remote_timeout = std::chrono::milliseconds(remote_timeout);
  }
  o->projects = static_cast<int>(projects);
  o->turns = static_cast<int>(turns);
  o->turns_after = static_cast<int>(turns_after);
  o->block_tokens = static_cast<uint32_t>(block);
  o->seed = static_cast<uint64_t>(seed);
  o->progress = [](const std::string& line) { std::fprintf(stderr, "statebank bench: %s\n", line.c_str()); };
  return Status::ok();
}

// The CSV beside the report and the plots drawn from it (c->plots, or why none).
Status write_csv_and_plots(const Args& args, const std::string& csv, const std::string& report,
                           const AgentResult& result, AgentReportContext* c) {
  std::error_code ec;
  if (!csv.empty()) {
    SB_RETURN_IF_ERROR(write_text(csv, agent_csv(result)));
    const fs::path base = report.empty() ? fs::path(csv).parent_path() : fs::path(report).parent_path();
    c->csv_name = fs::relative(fs::absolute(csv), fs::absolute(base.empty() ? "." : base), ec).string();
    if (c->csv_name.empty()) c->csv_name = csv;
    if (args.has("no-plots")) {
      c->plots_note = "Plots were not drawn (--no-plots).";
    } else {
      const fs::path stem = fs::path(report.empty() ? csv : report).replace_extension("");
      const std::string ttft_png = stem.string() + "_ttft.png", bytes_png = stem.string() + "_bytes.png";
      const std::string script = args.get("plot-script", find_plot_script("agent_plots.gp"));
      const std::string why = make_plots(script, csv, ttft_png, bytes_png);
      if (why.empty()) {
        c->plots.push_back({"time to first token per request, cold and warm", fs::path(ttft_png).filename().string()});
        c->plots.push_back({"bank bytes on disk as the conversations grow", fs::path(bytes_png).filename().string()});
      } else {
        c->plots_note = why + "; `tools/bench/plot_agent.sh " + csv + "` draws them later.";
        std::fprintf(stderr, "statebank bench: %s\n", why.c_str());
      }
    }
  } else {
    c->csv_name = "(no CSV: give --csv or --report)";
  }
  return Status::ok();
}

// One summary line; every mismatch. The exit code: 1 when a bank response differs from bypass.
int report_outcome(const AgentResult& result) {
  const AgentSummary sum = summarize(result);
  std::fprintf(stderr,
               "statebank bench: %d of %d bank responses equal to bypass; warm RAM %.1f %%, warm SSD %.1f %% of cold; "
               "restore %.2f GB/s vs dd %.2f GB/s; dedup %.2f; %.0f s\n",
               sum.equal, sum.requests, 100 * sum.ram_ratio, 100 * sum.ssd.ratio, sum.ssd.gbps, sum.dd_gbps,
               sum.dedup_ratio, result.wall_seconds);
  if (!result.mismatches.empty()) {
    for (const auto& m : result.mismatches) std::fprintf(stderr, "statebank bench: MISMATCH %s\n", m.c_str());
    std::fprintf(stderr, "statebank bench: FAILED: %zu bank responses differ from the bypass run\n",
                 result.mismatches.size());
    return 1;
  }
  return 0;
}

}  // namespace

int bench_agent(int argc, char** argv) {
  Args args({"model", "arch", "preset", "cache-dir", "prefix-tokens", "project-tokens", "message-tokens",
             "reply-tokens", "projects", "turns", "turns-after", "block-tokens", "snapshot-every", "threads", "precision",
             "weights", "ram-bytes", "seed", "work-dir", "report", "csv", "plot-script", "remote", "remote-password-file",
             "remote-timeout-ms"},
            {"keep-bank", "no-plots", "help"});
  Status s = args.parse(argc, argv);
  if (!s) return fail("bench", s.message() + " (statebank bench --help)");
  if (args.has("help")) return print_usage(kAgentUsage);
  if (!args.positional().empty())
    return fail("bench", "unexpected argument '" + args.positional()[0] + "' (statebank bench --help)");
  AgentWorkloadOptions o;
  int64_t threads;
  if (!(s = agent_options(args, &o, &threads))) return fail("bench", s.message());

  BenchModel bm;
  if (!(s = open_bench_model(args, static_cast<int>(threads), &bm))) return fail("bench", s.to_string());
  const std::string& cache_base = bm.cache_base;
  const std::string& model_dir = bm.dir;
  const std::string& model_desc = bm.description;
  std::unique_ptr<Model> model = std::move(bm.model);

  const fs::path work = args.get("work-dir", (fs::path(cache_base).parent_path() / "bench").string());
  const fs::path run_dir = work / ("agent-" + std::to_string(::getpid()));
  std::error_code ec;
  if (fs::exists(run_dir, ec)) fs::remove_all(run_dir, ec);
  o.bank_dir = (run_dir / "bank").string();
  o.dd_file = (run_dir / "dd-baseline.bin").string();

  // Output paths, checked before the long run.
  const std::string report = args.get("report");
  std::string csv = args.get("csv");
  if (csv.empty() && !report.empty()) csv = (fs::path(report).replace_extension(".csv")).string();
  for (const auto& p : {report, csv}) {
    if (p.empty()) continue;
    const fs::path parent = fs::path(p).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (!parent.empty() && !fs::is_directory(parent, ec)) return fail("bench", "cannot create " + parent.string());
  }

  std::fprintf(stderr, "statebank bench: agent workload on %s, %lld threads, bank in %s\n", model_dir.c_str(),
               static_cast<long long>(threads), o.bank_dir.c_str());
  AgentResult result;
  s = run_agent_workload(*model, o, &result);
  if (!args.has("keep-bank")) fs::remove_all(run_dir, ec);
  if (!s) return fail("bench", s.to_string());

  AgentReportContext c;
  c.command = "tools/statebank.sh bench agent";
  for (int i = 1; i < argc; ++i) c.command.append(" ").append(quote_arg(argv[i]));
  c.model = model_desc;
  c.fingerprint = model->fingerprint();
  c.machine = cpu_name() + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores";
  c.date = utc_now();
  c.bank_dir = o.bank_dir;
  c.threads = static_cast<int>(threads);
  if (!(s = write_csv_and_plots(args, csv, report, result, &c))) return fail("bench", s.to_string());
  const std::string md = agent_markdown(result, o, c);
  if (report.empty()) {
    std::fputs(md.c_str(), stdout);
  } else {
    if (!(s = write_text(report, md))) return fail("bench", s.to_string());
    std::fprintf(stderr, "statebank bench: wrote %s%s%s\n", report.c_str(), csv.empty() ? "" : " and ", csv.c_str());
  }
  return report_outcome(result);
}

}  // namespace sb
