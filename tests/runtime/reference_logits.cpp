// reference_logits: the third voice of the cross-check (tools/xcheck/run.py).
// Runs the double-precision reference forward (reference_forward.h) over a
// prompt and a given continuation, and writes the same rows as
// `statebank run --logits-out`: the prompt rows of --rows, then the row after
// each continuation token but the last, as float32.
//
//   reference_logits --model DIR --prompt-ids 1,2,3 [--rows 0,-1] [--continue-ids 4,5] --logits-out FILE
//
// A tool, not a test: slow by design (plain loops in double), for the rows
// where statebank and llama.cpp disagree.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"
#include "tests/runtime/reference_forward.h"
#include "tools/xcheck/tool_args.h"

namespace {

constexpr const char* kTool = "reference_logits";

[[noreturn]] void die(const std::string& message) { xcheck::die(kTool, message); }

std::vector<long long> parse_list(const std::string& flag, const std::string& text) {
  return xcheck::parse_list(kTool, flag, text);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, ids_text, rows_text = "-1", cont_text, out_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") dir = value;
    else if (flag == "--prompt-ids") ids_text = value;
    else if (flag == "--rows") rows_text = value;
    else if (flag == "--continue-ids") cont_text = value;
    else if (flag == "--logits-out") out_path = value;
    else die("unknown flag " + flag);
  }
  if (argc % 2 == 0 || dir.empty() || ids_text.empty() || out_path.empty())
    die("usage: --model DIR --prompt-ids IDS [--rows R] [--continue-ids IDS] --logits-out FILE");
  sb::ModelConfig config;
  std::unique_ptr<sb::Checkpoint> checkpoint;
  sb::WeightSet weights;
  sb::Status s = sb::parse_config(dir, &config);
  if (s) s = sb::Checkpoint::open(dir, &checkpoint);
  if (s) s = sb::WeightSet::bind(*checkpoint, config, &weights);
  if (!s) die(s.to_string());

  const std::vector<long long> prompt = parse_list("--prompt-ids", ids_text);
  const std::vector<long long> cont = parse_list("--continue-ids", cont_text);
  const long long n = static_cast<long long>(prompt.size());
  if (n == 0) die("--prompt-ids is empty");
  std::vector<std::vector<double>> rows_out(static_cast<size_t>(n));
  std::vector<bool> wanted(static_cast<size_t>(n), false);
  std::vector<long long> rows;
  for (long long r : parse_list("--rows", rows_text)) {
    if (r < -n || r >= n) die("--rows: " + std::to_string(r) + " is outside the prompt");
    rows.push_back(r < 0 ? n + r : r);
    wanted[static_cast<size_t>(rows.back())] = true;
  }
  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (!out) die("cannot create " + out_path);
  auto write = [&](const std::vector<double>& row) {
    std::vector<float> f(row.begin(), row.end());
    if (std::fwrite(f.data(), sizeof(float), f.size(), out) != f.size()) die("writing " + out_path + " failed");
  };
  sb::testing::ReferenceForward ref(config, weights, sb::testing::Rules{});
  for (long long i = 0; i < n; ++i) {
    const bool want = wanted[static_cast<size_t>(i)];
    std::vector<double> logits = ref.next(static_cast<int32_t>(prompt[static_cast<size_t>(i)]), want);
    if (want) rows_out[static_cast<size_t>(i)] = std::move(logits);
  }
  for (long long r : rows) write(rows_out[static_cast<size_t>(r)]);
  for (size_t k = 0; k + 1 < cont.size(); ++k) write(ref.next(static_cast<int32_t>(cont[k])));
  if (std::fclose(out) != 0) die("writing " + out_path + " failed");
  return 0;
}
