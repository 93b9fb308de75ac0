#include "cli/commands.h"

namespace sb {

int cmd_run(int argc, char** argv) { return fail("run", "not built yet"); }

}  // namespace sb
