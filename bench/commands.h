// The `statebank bench` subcommands: each parses its flags (common/args.h),
// runs its workload and writes its report; cli/cmd_bench.cpp only picks one.
// Each returns the process exit code; errors are one line on stderr.
#pragma once

namespace sb {

extern const char* const kAgentUsage;
int bench_agent(int argc, char** argv);  // bench/agent_command.cpp
extern const char* const kAgentsUsage;
int bench_agents(int argc, char** argv);  // bench/agents_command.cpp
extern const char* const kLoadUsage;
int bench_load(int argc, char** argv);  // bench/load_command.cpp
extern const char* const kSpecUsage;
int bench_spec(int argc, char** argv);  // bench/spec_command.cpp

}  // namespace sb
