// statebank tokenize --model DIR [--no-special] TEXT
// statebank tokenize --model DIR [--no-special] --jsonl   (stdin: one JSON string per line)
//
// Prints the ids of TEXT as "1,2,3" (what detokenize takes), or with --jsonl
// one JSON id array per input line. --no-special leaves special tokens such
// as <|im_start|> in the text as plain characters (HF split_special_tokens).
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/jsonl.h"
#include "model/model_arg.h"
#include "common/args.h"
#include "server/backend/model_files.h"
#include "tokenizer/tokenizer.h"

namespace sb {

int cmd_tokenize(int argc, char** argv) {
  const char* usage = "usage: statebank tokenize --model DIR|FILE.gguf|demo [--no-special] (TEXT | --jsonl)";
  Args args({"model"}, {"jsonl", "no-special", "help"});
  if (Status st = args.parse(argc, argv); !st) return fail("tokenize", st.message());
  if (args.has("help")) return print_usage(usage);
  if (!args.has("model")) return fail("tokenize", "--model is required");
  bool jsonl = args.has("jsonl");
  if (jsonl && !args.positional().empty()) return fail("tokenize", "--jsonl reads stdin; give no TEXT");
  if (!jsonl && args.positional().size() != 1) return fail("tokenize", "give exactly one TEXT argument (or --jsonl)");
  std::unique_ptr<Tokenizer> tok;
  std::string model;
  if (Status st = resolve_model_dir(args.get("model"), &model); !st) return fail("tokenize", st.to_string());
  if (Status st = load_model_tokenizer(model, &tok); !st) return fail("tokenize", st.to_string());
  bool special = !args.has("no-special");

  if (!jsonl) {
    std::string out;
    for (int32_t id : tok->encode(args.positional()[0], special)) {
      if (!out.empty()) out += ',';
      out += std::to_string(id);
    }
    std::printf("%s\n", out.c_str());
  } else {
    Status s = map_jsonl_stdin([&](const nlohmann::json& in, nlohmann::json* out) {
      if (!in.is_string()) return Status::invalid("expected one JSON string");
      *out = tok->encode(in.get_ref<const std::string&>(), special);
      return Status::ok();
    });
    if (!s) return fail("tokenize", s.message());
  }
  if (Status s = finish_stdout(); !s) return fail("tokenize", s.message());
  return 0;
}

}  // namespace sb
