// One function per `statebank` subcommand, each in cli/cmd_<name>.cpp.
// Each returns the process exit code; errors are printed as one line on stderr.
#pragma once

#include <string>

#include "common/args.h"  // fail(), print_usage()

namespace sb {

int cmd_serve(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_gen_model(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_bank(int argc, char** argv);
int cmd_bench(int argc, char** argv);

}  // namespace sb
