#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "common/memory_tuning.h"

namespace {

struct Command {
  const char* name;
  int (*fn)(int, char**);
  const char* help;
};

const Command kCommands[] = {
    {"serve", sb::cmd_serve, "serve the OpenAI-compatible HTTP API"},
    {"run", sb::cmd_run, "one-shot generation without a server"},
    {"gen-model", sb::cmd_gen_model, "write a deterministic random-weight checkpoint"},
    {"quantize", sb::cmd_quantize, "write a checkpoint as a GGUF file (f32, bf16, q8_0, q4_k_m, ...)"},
    {"tokenize", sb::cmd_tokenize, "text to token ids"},
    {"detokenize", sb::cmd_detokenize, "token ids to text"},
    {"bank", sb::cmd_bank, "inspect, verify and clean a bank directory (stats|ls|prefixes|verify|gc|flush)"},
    {"bench", sb::cmd_bench, "benchmarks"},
};

int usage(FILE* to) {
  std::fprintf(to, "usage: statebank <command> [flags]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(to, "  %-11s %s\n", c.name, c.help);
  return to == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  sb::tune_memory(argv);
  if (argc < 2) return usage(stderr);
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help"))
    return usage(stdout);
  for (const auto& c : kCommands) {
    if (std::strcmp(argv[1], c.name) == 0) {
      try {
        return c.fn(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        return sb::fail(c.name, std::string("internal error: ") + e.what());
      }
    }
  }
  std::fprintf(stderr, "statebank: unknown command '%s'\n", argv[1]);
  return usage(stderr);
}
