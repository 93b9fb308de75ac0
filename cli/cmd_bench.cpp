// statebank bench: picks one of the benchmarks (bench/commands.h); their
// flags, workloads and reports are bench/'s.
#include <cstdio>
#include <string>

#include "bench/commands.h"
#include "cli/commands.h"

namespace sb {

int cmd_bench(int argc, char** argv) {
  if (argc < 2) return fail("bench", "which benchmark? (agent, agents, load, spec; statebank bench --help)");
  const std::string which = argv[1];
  if (which == "agent") return bench_agent(argc - 1, argv + 1);
  if (which == "agents") return bench_agents(argc - 1, argv + 1);
  if (which == "load") return bench_load(argc - 1, argv + 1);
  if (which == "spec") return bench_spec(argc - 1, argv + 1);
  if (which == "--help" || which == "-h") {
    std::printf("%s\n%s\n%s\n%s\n", kAgentUsage, kLoadUsage, kAgentsUsage, kSpecUsage);
    return 0;
  }
  return fail("bench", "unknown benchmark '" + which + "' (agent, agents, load, spec; statebank bench --help)");
}

}  // namespace sb
