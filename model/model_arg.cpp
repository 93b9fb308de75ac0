#include "model/model_arg.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "model/demo.h"
#include "model/gguf_model.h"

namespace sb {

Status resolve_model_dir(const std::string& arg, std::string* dir) {
  if (arg.empty()) return Status::invalid("--model is required (a checkpoint directory, or demo)");
  if (arg == "demo") return ensure_demo_model(dir);
  std::error_code ec;
  // A file is read as GGUF whatever its name (is_gguf_path); a directory as a checkpoint.
  if (!std::filesystem::is_regular_file(arg, ec) && !std::filesystem::is_directory(arg, ec))
    return Status::not_found("--model " + arg + ": no such " +
                             (is_gguf_path(arg) ? std::string("file") : "file or directory") +
                             " (--model takes a checkpoint directory, a GGUF file, or demo)");
  *dir = arg;
  return Status::ok();
}

Status apply_weights_arg(const std::string& weights, std::string* model) {
  if (weights.empty()) return Status::ok();
  GgufFileType type;
  SB_RETURN_IF_ERROR(parse_gguf_file_type(weights, &type));
  if (is_gguf_path(*model)) return Status::invalid("--weights quantizes a checkpoint directory, not " + *model);
  std::unique_ptr<Checkpoint> ck;
  SB_RETURN_IF_ERROR(Checkpoint::open(*model, &ck));
  const std::filesystem::path dir = std::filesystem::path(demo_model_dir()).parent_path() / "quantized";
  const std::string path = (dir / (ck->weights_digest() + "." + weights + ".gguf")).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::io_error("cannot create " + dir.string() + ": " + ec.message());
    std::fprintf(stderr, "statebank: quantizing %s to %s (once; cached as %s)\n", model->c_str(), weights.c_str(),
                 path.c_str());
    SB_RETURN_IF_ERROR(write_gguf_model(*model, type, path));  // written to path.tmp, then renamed
  }
  *model = path;
  return Status::ok();
}

Status parse_precision_arg(const std::string& arg, std::optional<Precision>* out) {
  out->reset();
  if (arg.empty()) return Status::ok();
  Precision p;
  SB_RETURN_IF_ERROR(parse_precision(arg, &p));
  *out = p;
  return Status::ok();
}


}  // namespace sb
