#include "cli/commands.h"

namespace sb {

int cmd_bank(int argc, char** argv) { return fail("bank", "not built yet"); }

}  // namespace sb
