// statebank quantize: writes a checkpoint directory as a GGUF file
// (model/gguf_model.h) in one type or a llama-quantize mix.
#include <cstdio>

#include "cli/commands.h"
#include "common/args.h"
#include "model/gguf_model.h"

namespace sb {

int cmd_quantize(int argc, char** argv) {
  const char* cmd = "quantize";
  const char* usage =
      "usage: statebank quantize IN_DIR OUT.gguf --type "
      "f32|bf16|q8_0|q4_0|q4_k_m|q5_k_m|q6_k|q2_k|q3_k_m|iq4_nl|iq4_xs";
  Args args({"type"}, {"help"});
  if (Status s = args.parse(argc, argv); !s) return fail(cmd, s.message());
  if (args.has("help")) return print_usage(usage);
  if (args.positional().size() != 2) return fail(cmd, usage);
  if (!args.has("type"))
    return fail(cmd, "--type is required (f32, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k, q2_k, q3_k_m, iq4_nl, iq4_xs)");
  GgufFileType type;
  if (Status s = parse_gguf_file_type(args.get("type"), &type); !s) return fail(cmd, s.message());
  const std::string& in = args.positional()[0];
  const std::string& out = args.positional()[1];
  if (!is_gguf_path(out)) return fail(cmd, "the output " + out + " must end in .gguf");
  if (Status s = write_gguf_model(in, type, out); !s) return fail(cmd, s.message());
  std::printf("wrote %s (%s)\n", out.c_str(), gguf_file_type_name(type));
  return 0;
}

}  // namespace sb
