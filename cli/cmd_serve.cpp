#include "cli/commands.h"

namespace sb {

int cmd_serve(int argc, char** argv) { return fail("serve", "not built yet"); }

}  // namespace sb
