// Helpers shared by the `statebank bench` subcommands: the generated
// benchmark checkpoints, report metadata, files and plots.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "cli/args.h"
#include "common/status.h"
#include "model/model.h"

namespace sb {

std::string read_text(const std::filesystem::path& p);
// Writes through a temporary sibling renamed into place.
Status write_text(const std::string& path, const std::string& text);
// The checkpoint of (arch, preset) under the cache, generated once (to a
// temporary sibling, renamed into place).
Status ensure_bench_model(const std::string& cache_dir, const std::string& arch_name, const std::string& preset,
                          std::string* dir);
// The model a bench runs: --model DIR, else the --arch/--preset (qwen3_5,
// 0.8b) checkpoint generated once under --cache-dir; loaded with `threads`
// and --precision. `description` names it for a report.
struct BenchModel {
  std::string dir, description, cache_base;
  std::unique_ptr<Model> model;
};
Status open_bench_model(const Args& args, int threads, BenchModel* out);
// open_bench_model() without the load: dir, description and cache_base.
Status resolve_bench_model(const Args& args, BenchModel* out);
std::string cpu_name();
std::string utc_now();
// A shell word for `a` (quoted when needed), for the command lines reports print.
std::string quote_arg(const std::string& a);
bool on_path(const std::string& name);
std::string find_plot_script(const std::string& name);

extern const char* const kLoadUsage;
int bench_load(int argc, char** argv);
extern const char* const kAgentsUsage;
int bench_agents(int argc, char** argv);  // cli/cmd_bench_agents.cpp

}  // namespace sb
