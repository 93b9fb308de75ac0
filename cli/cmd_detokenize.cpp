// statebank detokenize --model DIR 1,2,3        (or "[1, 2, 3]")
// statebank detokenize --model DIR --jsonl      (stdin: one JSON id array per line)
//
// Prints the decoded text followed by a newline, or with --jsonl one JSON
// string per input line. An id outside the vocabulary is an error naming it.
// Bytes that do not form whole UTF-8 characters come out as U+FFFD.
#include <climits>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/jsonl.h"
#include "model/model_arg.h"
#include "common/args.h"
#include "server/backend/model_files.h"
#include "tokenizer/tokenizer.h"

namespace sb {

namespace {

Status parse_ids(const std::string& text, std::vector<int32_t>* ids) {
  std::string s = text;
  size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n");
  if (b == std::string::npos) return Status::ok();
  s = s.substr(b, e - b + 1);
  if (s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  size_t i = 0;
  while (i <= s.size()) {
    size_t comma = s.find(',', i);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(i, comma - i);
    size_t ib = item.find_first_not_of(" \t"), ie = item.find_last_not_of(" \t");
    item = ib == std::string::npos ? "" : item.substr(ib, ie - ib + 1);
    if (item.empty() && comma == s.size() && i == 0) break;  // "[]"
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < INT32_MIN || v > INT32_MAX)
      return Status::invalid("'" + item + "' is not a token id");
    ids->push_back(static_cast<int32_t>(v));
    i = comma + 1;
  }
  return Status::ok();
}

}  // namespace

int cmd_detokenize(int argc, char** argv) {
  const char* usage = "usage: statebank detokenize --model DIR|FILE.gguf|demo (1,2,3 | --jsonl)";
  Args args({"model"}, {"jsonl", "help"});
  if (Status st = args.parse(argc, argv); !st) return fail("detokenize", st.message());
  if (args.has("help")) return print_usage(usage);
  if (!args.has("model")) return fail("detokenize", "--model is required");
  bool jsonl = args.has("jsonl");
  if (jsonl && !args.positional().empty()) return fail("detokenize", "--jsonl reads stdin; give no IDS");
  if (!jsonl && args.positional().size() != 1) return fail("detokenize", "give exactly one IDS argument (or --jsonl)");
  std::unique_ptr<Tokenizer> tok;
  std::string model;
  if (Status st = resolve_model_dir(args.get("model"), &model); !st) return fail("detokenize", st.to_string());
  if (Status st = load_model_tokenizer(model, &tok); !st) return fail("detokenize", st.to_string());

  if (!jsonl) {
    std::vector<int32_t> ids;
    if (Status st = parse_ids(args.positional()[0], &ids); !st) return fail("detokenize", st.message());
    std::string text;
    if (Status st = tok->decode_checked(ids, &text); !st) return fail("detokenize", st.message());
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    Status s = map_jsonl_stdin([&](const nlohmann::json& in, nlohmann::json* out) {
      if (!in.is_array()) return Status::invalid("expected one JSON array of ids");
      std::vector<int32_t> ids;
      for (const auto& v : in) {
        if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
          return Status::invalid(v.dump() + " is not a token id");
        ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
      }
      std::string text;
      SB_RETURN_IF_ERROR(tok->decode_checked(ids, &text));
      *out = text;
      return Status::ok();
    });
    if (!s) return fail("detokenize", s.message());
  }
  if (Status s = finish_stdout(); !s) return fail("detokenize", s.message());
  return 0;
}

}  // namespace sb
