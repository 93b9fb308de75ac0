// Resolves a --model argument: a checkpoint directory, or `demo` for the
// built-in demo model (generated on first use, model/demo.h); and where the
// bank lives when --bank-dir is not given.
#pragma once

#include <string>

#include "common/status.h"

namespace sb {

Status resolve_model_dir(const std::string& arg, std::string* dir);

// The default --bank-dir: $XDG_CACHE_HOME/statebank/bank, else
// $HOME/.cache/statebank/bank; empty when neither variable is set.
std::string default_bank_dir();

}  // namespace sb
