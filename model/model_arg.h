// Resolves a --model argument: a checkpoint directory, a GGUF file (any
// file, model/gguf_model.h), or `demo` for the
// built-in demo model (generated on first use, model/demo.h), the --weights
// argument, and the --precision argument every command that loads a model
// takes: what the commands (cli/) and the benchmarks (bench/) share.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "runtime/kernels.h"

namespace sb {

Status resolve_model_dir(const std::string& arg, std::string* dir);

// --weights TYPE (a `statebank quantize --type`, e.g. q8_0 or q4_k_m): the
// checkpoint directory *model quantized once into a GGUF file cached beside
// the demo model (models/quantized/, named by the checkpoint's weights
// digest and the type); *model becomes that file. Empty: *model unchanged.
Status apply_weights_arg(const std::string& weights, std::string* model);

// "bf16" or "f32"; empty: unset (the checkpoint's default).
Status parse_precision_arg(const std::string& arg, std::optional<Precision>* out);

}  // namespace sb
