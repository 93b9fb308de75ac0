// Resolves a --model argument: a checkpoint directory, or `demo` for the
// built-in demo model (generated on first use, model/demo.h).
#pragma once

#include <string>

#include "common/status.h"

namespace sb {

Status resolve_model_dir(const std::string& arg, std::string* dir);

}  // namespace sb
