// Runs tools/bench/spec_llama.py for `statebank bench spec` (bench/spec_llama.h).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/spec_llama.h"
#include "bench/command_util.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

// The GGUF converter needs numpy: Debian's python3-numpy, which a python3
// earlier on PATH (a virtual environment) may lack.
std::string python_with_numpy() {
  for (const char* candidate : {"python3", "/usr/bin/python3"})
    if (std::system((quote_arg(candidate) + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0) return candidate;
  return "";
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace

std::string default_llama_bin() {
  const char* dir = std::getenv("SB_LLAMA_DIR");
  return std::string(dir && *dir ? dir : "/work/cache/llama.cpp") + "/build/bin";
}

LlamaSpecRow run_llama_ngram(const LlamaSpecJob& job) {
  LlamaSpecRow row;
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(job.llama_bin) / "llama-server", ec)) {
    row.skipped = "llama.cpp not built: skipped (no " + job.llama_bin + "/llama-server; tools/llama/build_llama.sh)";
    return row;
  }
  const std::string script = find_plot_script("spec_llama.py");
  if (script.empty()) return row.skipped = "tools/bench/spec_llama.py not found: skipped", row;
  const std::string python = python_with_numpy();
  if (python.empty()) return row.skipped = "no python3 with numpy (apt-get install python3-numpy): skipped", row;
  fs::create_directories(job.work, ec);
  const std::string workload = (fs::path(job.work) / "spec-workload.json").string();
  const std::string out = (fs::path(job.work) / "spec-llama.json").string();
  const std::string err = (fs::path(job.work) / "spec-llama.log").string();
  nlohmann::json bias = nlohmann::json::array();
  for (const auto& [token, value] : job.logit_bias) bias.push_back({token, value});
  const nlohmann::json w = {{"prompt", job.prompt}, {"n_predict", job.decode_tokens}, {"logit_bias", bias}};
  if (!write_text(workload, w.dump())) return row.skipped = "cannot write " + workload + ": skipped", row;
  const std::string cmd = quote_arg(python) + " " + quote_arg(script) + " --llama-bin " + quote_arg(job.llama_bin) +
                          " --checkpoint " + quote_arg(job.checkpoint) + " --workload " + quote_arg(workload) +
                          " --work " + quote_arg(job.work) + " --threads " + std::to_string(job.threads) + " --reps " +
                          std::to_string(job.reps) + " --draft-max " + std::to_string(job.draft_max) + " >" +
                          quote_arg(out) + " 2>" + quote_arg(err);
  std::fprintf(stderr, "statebank bench: %s\n", cmd.c_str());
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    row.skipped = "llama.cpp run failed: " + last_line(read_text(err)) + " (" + err + ")";
    return row;
  }
  const nlohmann::json j = nlohmann::json::parse(read_text(out), nullptr, false);
  if (!j.is_object()) return row.skipped = "llama.cpp run gave no result (" + err + ")", row;
  row.tokens_per_s = j.value("tokens_per_s", 0.0);
  row.plain_tokens_per_s = j.value("plain_tokens_per_s", 0.0);
  row.drafted = j.value("drafted", int64_t{0});
  row.accepted = j.value("accepted", int64_t{0});
  row.flags = j.value("flags", std::string());
  return row;
}

}  // namespace sb
