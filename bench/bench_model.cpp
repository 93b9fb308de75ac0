#include "bench/bench_model.h"

#include <filesystem>

#include "model/gen_model.h"

namespace sb {

Status bench_checkpoint(const std::string& arch_name, const std::string& preset, std::string dir, std::string* out,
                        ModelConfig* config_out) {
  Arch arch;
  ModelConfig config;
  SB_RETURN_IF_ERROR(parse_arch(arch_name, &arch));
  SB_RETURN_IF_ERROR(preset_config(arch, preset, &config));
  if (dir.empty()) dir = (std::filesystem::temp_directory_path() / ("sb_bench_" + arch_name + "_" + preset)).string();
  if (!std::filesystem::exists(dir + "/config.json")) {
    std::string tok;
    SB_RETURN_IF_ERROR(find_tokenizer_dir("", &tok));
    SB_RETURN_IF_ERROR(write_random_checkpoint(config, 0, DType::kBF16, tok, dir));
  }
  *out = dir;
  if (config_out) *config_out = config;
  return Status::ok();
}

}  // namespace sb
