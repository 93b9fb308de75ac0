#include "cli/model_arg.h"

#include <filesystem>

#include "model/demo.h"

namespace sb {

Status resolve_model_dir(const std::string& arg, std::string* dir) {
  if (arg.empty()) return Status::invalid("--model is required (a checkpoint directory, or demo)");
  if (arg == "demo") return ensure_demo_model(dir);
  std::error_code ec;
  if (!std::filesystem::is_directory(arg, ec)) return Status::not_found("model directory " + arg + " does not exist");
  *dir = arg;
  return Status::ok();
}

}  // namespace sb
