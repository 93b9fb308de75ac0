// The generated checkpoint a model benchmark runs on: --dir when given, else
// a directory under the system temp dir named after arch and preset, shared
// by every benchmark and kept between runs (generating the 0.8b preset takes
// a while). Written once, deterministic (seed 0, bf16).
#pragma once

#include <string>

#include "common/status.h"
#include "model/config.h"

namespace sb {

// *out: the checkpoint's directory; *config (when given): the preset's config.
Status bench_checkpoint(const std::string& arch, const std::string& preset, std::string dir, std::string* out,
                        ModelConfig* config = nullptr);

}  // namespace sb
