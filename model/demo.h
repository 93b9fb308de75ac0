// The built-in demo model: a small random-weight qwen3_next checkpoint
// (gen-model preset "small", seed 0, bf16) with the real Qwen3 tokenizer.
//
// ensure_demo_model() generates it on first use under
// $XDG_CACHE_HOME/statebank/models/demo (else ~/.cache/statebank/models/demo)
// and reuses it afterwards. It is written to a temporary sibling directory and
// renamed into place, so a reader never sees a half-written model; when two
// processes race, one rename wins and both use the winner. A directory left
// by another recipe (its `demo_recipe` file differs) is replaced.
// Thread-safe across threads and processes.
#pragma once

#include <string>

#include "common/status.h"

namespace sb {

// Sets *dir to the demo model's directory, generating it if needed.
Status ensure_demo_model(std::string* dir);
// The cache directory the demo model lives in (not created).
std::string demo_model_dir();

}  // namespace sb
