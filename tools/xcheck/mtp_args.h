// The flags of the MTP head cross-check's two programs (docs/xcheck.md, "MTP
// head"): tools/xcheck/llama_mtp.cpp (llama.cpp's side) and
// tests/model/mtp_logits.cpp (statebank's) take the same ones, so that
// tools/xcheck/mtp_check.py drives both alike. Header-only, as they share no
// library.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/xcheck/tool_args.h"

namespace xcheck {

struct MtpFlags {
  std::string model, ids, out, target;  // target: forced target tokens (else greedy)
  int steps = 8, depth = 3, prompt_rows = 1, threads = 2;
  std::vector<int32_t> prompt, forced;  // ids and target parsed: a prompt, and none or at least `steps` tokens
};

// --model FILE --prompt-ids IDS --logits-out FILE [--target-ids IDS]
// [--steps S] [--depth D] [--prompt-rows 0|1] [--threads T], the id lists
// parsed; anything else (an empty prompt, fewer target ids than steps) ends
// the program with a message.
inline MtpFlags parse_mtp_flags(const char* tool, int argc, char** argv) {
  MtpFlags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) die(tool, flag + " wants a value");
    const std::string value = argv[++i];
    if (flag == "--model")
      f.model = value;
    else if (flag == "--prompt-ids")
      f.ids = value;
    else if (flag == "--target-ids")
      f.target = value;
    else if (flag == "--logits-out")
      f.out = value;
    else if (flag == "--steps")
      f.steps = std::atoi(value.c_str());
    else if (flag == "--depth")
      f.depth = std::atoi(value.c_str());
    else if (flag == "--prompt-rows")
      f.prompt_rows = std::atoi(value.c_str());
    else if (flag == "--threads")
      f.threads = std::atoi(value.c_str());
    else
      die(tool, "unknown flag " + flag);
  }
  if (f.model.empty() || f.ids.empty() || f.out.empty())
    die(tool, "--model, --prompt-ids and --logits-out are required");
  if (f.steps < 1 || f.depth < 1 || f.threads < 1 || (f.prompt_rows != 0 && f.prompt_rows != 1))
    die(tool, "--steps, --depth and --threads must be positive, --prompt-rows 0 or 1");
  for (long long v : parse_list(tool, "--prompt-ids", f.ids)) f.prompt.push_back(static_cast<int32_t>(v));
  for (long long v : parse_list(tool, "--target-ids", f.target)) f.forced.push_back(static_cast<int32_t>(v));
  if (!f.forced.empty() && static_cast<int>(f.forced.size()) < f.steps) die(tool, "--target-ids needs --steps ids");
  if (f.prompt.empty()) die(tool, "--prompt-ids is empty");
  return f;
}

}  // namespace xcheck
