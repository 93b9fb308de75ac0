#include "cli/commands.h"

namespace sb {

int cmd_gen_model(int argc, char** argv) { return fail("gen-model", "not built yet"); }

}  // namespace sb
