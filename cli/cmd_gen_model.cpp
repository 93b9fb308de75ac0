// statebank gen-model: writes a deterministic random-weight checkpoint.
#include <cstdint>
#include <cstdio>

#include "cli/commands.h"
#include "common/args.h"
#include "model/gen_model.h"

namespace sb {

int cmd_gen_model(int argc, char** argv) {
  const char* cmd = "gen-model";
  const char* usage =
      "usage: statebank gen-model --arch qwen3|qwen3_next|qwen3_5|qwen3_5_moe|qwen4exp "
      "--preset tiny|small|0.8b|4b|bench [--seed N] [--dtype bf16|f32] [--mtp-layers 0|1] [--tokenizer DIR] "
      "(OUT_DIR | --gguf-type TYPE OUT.gguf)";
  Args args({"arch", "preset", "seed", "dtype", "tokenizer", "mtp-layers", "gguf-type"}, {"help"});
  if (Status s = args.parse(argc, argv); !s) return fail(cmd, s.message());
  if (args.has("help")) return print_usage(usage);
  if (args.positional().size() != 1) return fail(cmd, usage);
  if (!args.has("arch")) return fail(cmd, "--arch is required");
  if (!args.has("preset")) return fail(cmd, "--preset is required");
  Arch arch;
  if (Status s = parse_arch(args.get("arch"), &arch); !s) return fail(cmd, s.message());
  ModelConfig config;
  if (Status s = preset_config(arch, args.get("preset"), &config); !s) return fail(cmd, s.message());
  int64_t seed = 0;
  if (Status s = args.get_int("seed", 0, 0, INT64_MAX, &seed); !s) return fail(cmd, s.message());
  // An MTP head is opt-in: the presets' files stay what they were.
  if (Status s = args.get_int("mtp-layers", 0, 0, 1, &config.mtp_layers); !s) return fail(cmd, s.message());
  if (config.mtp_layers > 0 && arch == Arch::kQwen3)
    return fail(cmd, std::string("--mtp-layers: ") + arch_name(arch) + " checkpoints have no MTP head");
  std::string dtype_name = args.get("dtype", "bf16");
  DType dtype;
  if (dtype_name == "bf16") dtype = DType::kBF16;
  else if (dtype_name == "f32") dtype = DType::kF32;
  else return fail(cmd, "--dtype must be bf16 or f32, got '" + dtype_name + "'");
  std::string tokenizer_dir;
  if (Status s = find_tokenizer_dir(args.get("tokenizer"), &tokenizer_dir); !s) return fail(cmd, s.message());
  const std::string out = args.positional()[0];
  std::string written = dtype_name;
  if (args.has("gguf-type")) {  // what `quantize` would make of OUT_DIR, without OUT_DIR
    GgufFileType type;
    if (Status s = parse_gguf_file_type(args.get("gguf-type"), &type); !s) return fail(cmd, "--gguf-type: " + s.message());
    if (!is_gguf_path(out)) return fail(cmd, "with --gguf-type the output " + out + " must end in .gguf");
    if (Status s = write_random_gguf(config, static_cast<uint64_t>(seed), dtype, tokenizer_dir, type, out); !s)
      return fail(cmd, s.message());
    written += " weights as a " + std::string(gguf_file_type_name(type)) + " GGUF file";
  } else if (Status s = write_random_checkpoint(config, static_cast<uint64_t>(seed), dtype, tokenizer_dir, out); !s) {
    return fail(cmd, s.message());
  }
  std::printf("wrote %s (%s, preset %s, seed %lld, %s)\n", out.c_str(), arch_name(arch), args.get("preset").c_str(),
              static_cast<long long>(seed), written.c_str());
  return 0;
}

}  // namespace sb
