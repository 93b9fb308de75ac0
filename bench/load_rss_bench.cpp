// The memory a loaded model holds against the bytes of its file: VmRSS and
// VmHWM (the peak) from /proc/self/status after Model::load, and again after
// a short prefill and a few decode steps (which must not fault dropped weight
// pages back in), beside the model file's size (a directory: its
// .safetensors shards; for a qwen4exp GGUF file also its bytes outside the
// n-gram table, which stays mapped) and the load's wall time. Under the malloc settings
// statebank runs with (common/memory_tuning.h), as `statebank serve` would.
//
// usage: load_rss_bench MODEL [--threads 1] [--precision f32|bf16]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/memory_tuning.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "runtime/cpu/backend.h"

namespace {

// A "Vm...:   123 kB" line of /proc/self/status, in bytes; -1 when absent.
double status_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(line.find(':') + 1)) * 1024.0;
  return -1;
}

double model_bytes(const std::string& path) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(path)) return static_cast<double>(fs::file_size(path));
  double total = 0;
  for (const auto& e : fs::directory_iterator(path))
    if (e.path().extension() == ".safetensors") total += static_cast<double>(e.file_size());
  return total;
}

// The bytes of a qwen4exp GGUF file's n-gram table (per_layer_token_embd),
// which stays mapped and is paged in only where rows are read; 0 otherwise.
double table_bytes(const std::string& path) {
  std::unique_ptr<sb::GgufFile> g;
  if (!sb::is_gguf_path(path) || !sb::GgufFile::open(path, &g, sb::GgufFile::Digest::kNo).is_ok()) return 0;
  const sb::TensorView* t = g->find_tensor("per_layer_token_embd.weight");
  return t ? static_cast<double>(t->nbytes) : 0;
}

void report(const char* when, double file, double table) {
  const double rss = status_bytes("VmRSS"), hwm = status_bytes("VmHWM");
  std::printf("%-22s VmRSS %8.1f MiB (%.3fx file; file pages %.1f, anonymous %.1f)  VmHWM %8.1f MiB (%.3fx file)\n",
              when, rss / 1048576, rss / file, status_bytes("RssFile") / 1048576, status_bytes("RssAnon") / 1048576,
              hwm / 1048576, hwm / file);
  if (table > 0)
    std::printf("%-22s VmRSS %.3fx the file's bytes outside the n-gram table (%.1f MiB of %.1f MiB)\n", "",
                rss / (file - table), (file - table) / 1048576, file / 1048576);
}

}  // namespace

int main(int argc, char** argv) {
  sb::tune_memory(argv);
  sb::Args args({"threads", "precision"}, {});
  sb::Status s = args.parse(argc, argv);
  int64_t threads = 1;
  if (s) s = args.get_int("threads", 1, 1, 256, &threads);
  sb::RuntimeOptions ro;
  ro.threads = static_cast<int>(threads);
  if (s && args.has("precision")) {
    const std::string p = args.get("precision");
    if (p == "f32" || p == "bf16")
      ro.precision = p == "f32" ? sb::Precision::kF32 : sb::Precision::kBF16;
    else
      s = sb::Status::invalid("--precision must be f32 or bf16, got '" + p + "'");
  }
  if (!s || args.positional().size() != 1) {
    std::fprintf(stderr, "usage: load_rss_bench MODEL [--threads 1] [--precision f32|bf16]%s%s\n", s ? "" : ": ",
                 s ? "" : s.message().c_str());
    return 2;
  }
  const std::string path = args.positional()[0];
  const double file = model_bytes(path), table = table_bytes(path);
  std::printf("model %s: %.1f MiB\n", path.c_str(), file / 1048576);
  report("before load", file, table);
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<sb::Model> model;
  if (!(s = sb::Model::load(path, ro, sb::cpu_kernels_factory(), &model))) {
    std::fprintf(stderr, "load_rss_bench: %s\n", s.to_string().c_str());
    return 2;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("load %.2f s (%s)\n", secs, model->kernels_name().c_str());
  report("after load", file, table);
  sb::State state = model->new_state();
  std::vector<int32_t> prompt(64);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1000 + 37 * i);
  sb::PrefillOutput out;
  if (!(s = model->prefill(state, prompt, sb::PrefillOptions{}, &out))) {
    std::fprintf(stderr, "load_rss_bench: %s\n", s.to_string().c_str());
    return 2;
  }
  std::vector<float> logits;
  for (int step = 0; step < 4 && s; ++step) s = model->decode(state, 42, &logits);
  if (!s) {
    std::fprintf(stderr, "load_rss_bench: %s\n", s.to_string().c_str());
    return 2;
  }
  report("after 64 + 4 tokens", file, table);
  return 0;
}
