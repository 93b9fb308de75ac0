// Helpers shared by the `statebank bench` subcommands (bench/commands.h):
// the generated benchmark checkpoints, report metadata, files and plots.
#pragma once

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/args.h"
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
// and --precision (and the checkpoint's MTP head unless mtp_head is false,
// as `serve --speculative off` loads it). `description` names it for a report.
struct BenchModel {
  std::string dir, description, cache_base;
  std::unique_ptr<Model> model;
};
Status open_bench_model(const Args& args, int threads, BenchModel* out, bool mtp_head = true);
// open_bench_model() without the load: dir, description and cache_base.
Status resolve_bench_model(const Args& args, BenchModel* out);
std::string cpu_name();
std::string utc_now();
// A shell word for `a` (quoted when needed), for the command lines reports print.
std::string quote_arg(const std::string& a);
bool on_path(const std::string& name);
std::string find_plot_script(const std::string& name);

// A comma-separated list of numbers, each accepted by `valid`.
template <typename T>
Status parse_list(const std::string& flag, const std::string& text, const std::string& what, bool (*valid)(double),
                  std::vector<T>* out) {
  out->clear();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !valid(v) || static_cast<double>(static_cast<T>(v)) != v)
      return Status::invalid("--" + flag + " takes a comma-separated list of " + what + ", not '" + text + "'");
    out->push_back(static_cast<T>(v));
  }
  if (out->empty()) return Status::invalid("--" + flag + " is empty");
  return Status::ok();
}

}  // namespace sb
