#include "cli/commands.h"

namespace sb {

int cmd_bench(int argc, char** argv) { return fail("bench", "not built yet"); }

}  // namespace sb
