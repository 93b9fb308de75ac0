// statebank run: one-shot generation without a server or a bank.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_arg.h"
#include "model/model.h"
#include "runtime/sampling.h"
#include "tokenizer/tokenizer.h"

namespace sb {
namespace {

Status parse_ids(const std::string& text, std::vector<int32_t>* out) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > INT32_MAX)
      return Status::invalid("--prompt-ids: '" + item + "' is not a token id");
    out->push_back(static_cast<int32_t>(v));
  }
  if (out->empty()) return Status::invalid("--prompt-ids is empty");
  return Status::ok();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int cmd_run(int argc, char** argv) {
  Args args({"model", "prompt", "prompt-ids", "max-tokens", "threads", "precision", "temperature", "top-p", "top-k",
             "seed"},
            {"ids"});
  Status s = args.parse(argc, argv);
  if (!s) return fail("run", s.message());
  if (args.has("prompt") == args.has("prompt-ids")) return fail("run", "give exactly one of --prompt and --prompt-ids");
  int64_t max_tokens, threads, top_k, seed;
  double temperature, top_p;
  if (!(s = args.get_int("max-tokens", 32, 1, 1 << 20, &max_tokens)) ||
      !(s = args.get_int("threads", 2, 1, 256, &threads)) || !(s = args.get_int("top-k", 0, 0, 1 << 30, &top_k)) ||
      !(s = args.get_int("seed", 0, 0, INT64_MAX, &seed)) || !(s = args.get_double("temperature", 0.0, &temperature)) ||
      !(s = args.get_double("top-p", 1.0, &top_p)))
    return fail("run", s.message());
  if (temperature < 0 || !(top_p > 0 && top_p <= 1)) return fail("run", "--temperature must be >= 0 and --top-p in (0, 1]");

  std::string dir;
  if (!(s = resolve_model_dir(args.get("model"), &dir))) return fail("run", s.to_string());
  std::unique_ptr<Model> model;
  RuntimeOptions options;
  options.threads = static_cast<int>(threads);
  if (!(s = parse_precision_arg(args.get("precision"), &options.precision))) return fail("run", s.message());
  if (!(s = Model::load(dir, options, &model))) return fail("run", s.to_string());
  std::unique_ptr<Tokenizer> tokenizer;
  Status tok_status = Tokenizer::load(dir, &tokenizer);

  std::vector<int32_t> prompt;
  if (args.has("prompt")) {
    if (!tok_status) return fail("run", "--prompt needs the checkpoint's tokenizer: " + tok_status.to_string());
    prompt = tokenizer->encode(args.get("prompt"));
    if (prompt.empty()) return fail("run", "--prompt encodes to no tokens");
  } else if (!(s = parse_ids(args.get("prompt-ids"), &prompt))) {
    return fail("run", s.message());
  }
  std::vector<int32_t> stops;
  if (tok_status) stops = tokenizer->stop_tokens();

  State state = model->new_state();
  PrefillOutput out;
  auto t0 = std::chrono::steady_clock::now();
  if (!(s = model->prefill(state, prompt, {}, &out))) return fail("run", s.to_string());
  const double prefill_s = seconds_since(t0);
  Sampler sampler({static_cast<float>(temperature), static_cast<float>(top_p), static_cast<int>(top_k),
                   static_cast<uint64_t>(seed)});
  std::vector<float> logits = std::move(out.logits);
  std::unique_ptr<StreamDecoder> stream;
  if (tok_status && !args.has("ids")) stream = std::make_unique<StreamDecoder>(*tokenizer);
  int64_t generated = 0;
  auto t1 = std::chrono::steady_clock::now();
  for (; generated < max_tokens; ++generated) {
    const int32_t token = sampler.sample(logits);
    if (stream)
      std::fputs(stream->push(token).c_str(), stdout);
    else
      std::printf("%s%d", generated ? "," : "", token);
    std::fflush(stdout);
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      ++generated;
      break;
    }
    if (generated + 1 < max_tokens && !(s = model->decode(state, token, &logits))) return fail("run", s.to_string());
  }
  if (stream) std::fputs(stream->flush().c_str(), stdout);
  std::printf("\n");
  const double decode_s = seconds_since(t1);
  std::fprintf(stderr, "prompt %zu tokens, prefill %.1f tok/s; generated %lld tokens, %.1f tok/s\n", prompt.size(),
               prompt.size() / prefill_s, static_cast<long long>(generated), generated / decode_s);
  return 0;
}

}  // namespace sb
