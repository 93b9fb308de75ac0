#include "cli/commands.h"

namespace sb {

int cmd_tokenize(int argc, char** argv) { return fail("tokenize", "not built yet"); }

}  // namespace sb
