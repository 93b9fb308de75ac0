// Helpers shared by the `statebank bench` subcommands: the generated
// benchmark checkpoints, report metadata, files and plots.
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"

namespace sb {

std::string read_text(const std::filesystem::path& p);
// Writes through a temporary sibling renamed into place.
Status write_text(const std::string& path, const std::string& text);
// The checkpoint of (arch, preset) under the cache, generated once (to a
// temporary sibling, renamed into place).
Status ensure_bench_model(const std::string& cache_dir, const std::string& arch_name, const std::string& preset,
                          std::string* dir);
std::string cpu_name();
std::string utc_now();
// A shell word for `a` (quoted when needed), for the command lines reports print.
std::string quote_arg(const std::string& a);
bool on_path(const std::string& name);
std::string find_plot_script(const std::string& name);

extern const char* const kLoadUsage;
int bench_load(int argc, char** argv);

}  // namespace sb
