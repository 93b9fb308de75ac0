#include "cli/commands.h"

namespace sb {

int cmd_detokenize(int argc, char** argv) { return fail("detokenize", "not built yet"); }

}  // namespace sb
