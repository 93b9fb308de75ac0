// statebank run: one-shot generation without a server.
//
// Without --restore the bank is not involved: the prompt is prefilled in one
// call (or, with --split-at K, the first K tokens prefilled and the rest fed
// one by one through decode), then tokens are drawn and decoded.
// With --restore the prompt goes through the engine over a RAM bank twice and
// the second request, restored from the first one's blocks, is the one
// reported: the serving path, restore included.
// --logits-out writes the logits the cross-check (tools/xcheck) compares with
// llama.cpp: raw little-endian float32 rows of vocab_size values, first the
// prompt rows of --logits-rows (default: the last), then one row per decode
// step (the logits each further generated token is drawn from). With it, stop
// tokens do not end generation, so every run writes the same number of rows.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <sstream>

#include "bank/bank.h"
#include "bank/ram_tier.h"
#include "cli/commands.h"
#include "model/model_arg.h"
#include "common/args.h"
#include "engine/engine.h"
#include "model/model.h"
#include "runtime/cpu/backend.h"
#include "runtime/sampling.h"
#include "server/backend/model_files.h"
#include "tokenizer/tokenizer.h"

namespace sb {
namespace {

// Comma-separated integers in [lo, hi].
Status parse_int_list(const std::string& flag, const std::string& text, int64_t lo, int64_t hi,
                      std::vector<int64_t>* out) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < lo || v > hi) return Status::invalid("--" + flag + ": '" + item + "' is not valid");
    out->push_back(v);
  }
  if (out->empty()) return Status::invalid("--" + flag + " is empty");
  return Status::ok();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Raw float32 rows into --logits-out; a no-op without the flag.
class LogitsFile {
 public:
  Status open(const std::string& path) {
    if (path.empty()) return Status::ok();
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) return Status::invalid("--logits-out: cannot create " + path);
    path_ = path;
    return Status::ok();
  }
  ~LogitsFile() {
    if (file_) std::fclose(file_);
  }
  bool on() const { return file_ != nullptr; }
  void write(std::span<const float> row) {
    if (file_ && std::fwrite(row.data(), sizeof(float), row.size(), file_) != row.size()) failed_ = true;
  }
  Status close() {
    if (!file_) return Status::ok();
    const bool bad = std::fclose(file_) != 0 || failed_;
    file_ = nullptr;
    return bad ? Status::invalid("--logits-out: writing " + path_ + " failed") : Status::ok();
  }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  bool failed_ = false;
};

struct RunFlags {
  int64_t max_tokens = 32;
  SamplingParams sampling;
  std::vector<int32_t> stops;  // empty with --logits-out
  bool print_ids = false;
  int64_t split_at = 0;        // 0: one prefill call
  uint32_t block_tokens = 256;
};

// Prints the generated tokens as text (or ids) as they come.
class TokenPrinter {
 public:
  TokenPrinter(const Tokenizer* tokenizer, bool ids) {
    if (tokenizer && !ids) stream_ = std::make_unique<StreamDecoder>(*tokenizer);
  }
  void push(int32_t token) {
    if (stream_)
      std::fputs(stream_->push(token).c_str(), stdout);
    else
      std::printf("%s%d", count_ ? "," : "", token);
    ++count_;
    std::fflush(stdout);
  }
  void finish() {
    if (stream_) std::fputs(stream_->flush().c_str(), stdout);
    std::printf("\n");
  }

 private:
  std::unique_ptr<StreamDecoder> stream_;
  int64_t count_ = 0;
};

// Prefill (or prefill + decode from --split-at), then draw and decode.
Status run_direct(const Model& model, const std::vector<int32_t>& prompt, const std::vector<int64_t>& rows,
                  const RunFlags& f, LogitsFile& logits_out, TokenPrinter& printer) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  const size_t vocab = static_cast<size_t>(model.vocab_size());
  State state = model.new_state();
  std::vector<float> logits;
  auto t0 = std::chrono::steady_clock::now();
  PrefillOutput out;
  PrefillOptions options;
  options.all_logits = std::any_of(rows.begin(), rows.end(), [n](int64_t r) { return r != n - 1; });
  const int64_t first = f.split_at > 0 ? f.split_at : n;
  SB_RETURN_IF_ERROR(model.prefill(state, std::span<const int32_t>(prompt).first(static_cast<size_t>(first)), options, &out));
  std::vector<float> prompt_logits = out.logits.to_vector();
  for (int64_t i = first; i < n; ++i) SB_RETURN_IF_ERROR(model.decode(state, prompt[static_cast<size_t>(i)], &prompt_logits));
  const double prefill_s = seconds_since(t0);
  for (int64_t r : rows) {
    const size_t at = options.all_logits ? static_cast<size_t>(r) * vocab : prompt_logits.size() - vocab;
    logits_out.write(std::span<const float>(prompt_logits).subspan(at, vocab));
  }
  logits.assign(prompt_logits.end() - static_cast<std::ptrdiff_t>(vocab), prompt_logits.end());

  Sampler sampler({f.sampling.temperature, f.sampling.top_p, f.sampling.top_k, f.sampling.seed});
  int64_t generated = 0;
  auto t1 = std::chrono::steady_clock::now();
  for (; generated < f.max_tokens; ++generated) {
    const int32_t token = sampler.sample(logits);
    printer.push(token);
    if (std::find(f.stops.begin(), f.stops.end(), token) != f.stops.end()) {
      ++generated;
      break;
    }
    if (generated + 1 < f.max_tokens) {
      SB_RETURN_IF_ERROR(model.decode(state, token, &logits));
      logits_out.write(logits);
    }
  }
  printer.finish();
  std::fprintf(stderr, "prompt %lld tokens, prefill %.1f tok/s; generated %lld tokens, %.1f tok/s\n",
               static_cast<long long>(n), n / prefill_s, static_cast<long long>(generated),
               generated / seconds_since(t1));
  return Status::ok();
}

// The prompt through the engine over a RAM bank: once to fill the bank, then
// again, restored; the second request is the one reported.
Status run_restored(const Model& model, const std::vector<int32_t>& prompt, const RunFlags& f, LogitsFile& logits_out,
                    TokenPrinter& printer) {
  RamTier ram(uint64_t{4} << 30);
  Bank bank({&ram});
  EngineOptions options;
  options.block_tokens = f.block_tokens;
  std::unique_ptr<Engine> engine;
  SB_RETURN_IF_ERROR(Engine::create(model, &bank, options, &engine));
  CompletionRequest request;
  request.prompt = prompt;
  request.max_tokens = 1;
  request.sampling = f.sampling;
  CompletionResult warm, result;
  SB_RETURN_IF_ERROR(engine->complete(request, &warm));
  request.max_tokens = f.max_tokens;
  request.stop_tokens = f.stops;
  request.on_logits = [&](std::span<const float> logits) { logits_out.write(logits); };
  request.on_token = [&](const GeneratedToken& g) {
    printer.push(g.token);
    return true;
  };
  SB_RETURN_IF_ERROR(engine->complete(request, &result));
  printer.finish();
  const RestoreRecord& r = result.restore;
  if (r.restore_point == 0)
    return Status::invalid("--restore: nothing was restored (the prompt needs more than --block-tokens " +
                           std::to_string(f.block_tokens) + " tokens)");
  std::fprintf(stderr, "prompt %zu tokens, restored %lld from %s, prefilled %lld; generated %zu tokens\n",
               prompt.size(), static_cast<long long>(r.restore_point), r.mode.name(),
               static_cast<long long>(r.prefill_tokens), result.tokens.size());
  return Status::ok();
}

const char* kUsage =
    "usage: statebank run --model DIR|FILE.gguf|demo [--weights TYPE] (--prompt TEXT | --prompt-ids 1,2,3) "
    "[--max-tokens 32] [--threads 2] [--precision bf16|f32] [--temperature 0] [--top-p 1] [--top-k 0] [--seed 0] "
    "[--ids] [--logits-out FILE [--logits-rows N] [--split-at N] [--restore [--block-tokens 256]]]";

}  // namespace

int cmd_run(int argc, char** argv) {
  Args args({"model", "prompt", "prompt-ids", "max-tokens", "threads", "precision", "temperature", "top-p", "top-k",
             "seed", "weights", "logits-out", "logits-rows", "split-at", "block-tokens"},
            {"ids", "restore", "help"});
  Status s = args.parse(argc, argv);
  if (!s) return fail("run", s.message());
  if (args.has("help")) return print_usage(kUsage);
  if (args.has("prompt") == args.has("prompt-ids")) return fail("run", "give exactly one of --prompt and --prompt-ids");
  RunFlags f;
  int64_t threads, top_k, seed, split_at, block_tokens;
  double temperature, top_p;
  if (!(s = args.get_int("max-tokens", 32, 1, 1 << 20, &f.max_tokens)) ||
      !(s = args.get_int("threads", 2, 1, 256, &threads)) || !(s = args.get_int("top-k", 0, 0, 1 << 30, &top_k)) ||
      !(s = args.get_int("seed", 0, 0, INT64_MAX, &seed)) || !(s = args.get_double("temperature", 0.0, &temperature)) ||
      !(s = args.get_double("top-p", 1.0, &top_p)) || !(s = args.get_int("split-at", 0, 1, INT32_MAX, &split_at)) ||
      !(s = args.get_int("block-tokens", 256, kGrid, 1 << 20, &block_tokens)))
    return fail("run", s.message());
  if (temperature < 0 || !(top_p > 0 && top_p <= 1)) return fail("run", "--temperature must be >= 0 and --top-p in (0, 1]");
  if (block_tokens % kGrid != 0) return fail("run", "--block-tokens must be a multiple of " + std::to_string(kGrid));
  if (args.has("split-at") && args.has("restore")) return fail("run", "--split-at and --restore exclude each other");
  f.sampling = {static_cast<float>(temperature), static_cast<float>(top_p), static_cast<int>(top_k),
                static_cast<uint64_t>(seed)};
  f.split_at = split_at;
  f.block_tokens = static_cast<uint32_t>(block_tokens);
  f.print_ids = args.has("ids");

  std::string dir;
  if (!(s = resolve_model_dir(args.get("model"), &dir))) return fail("run", s.to_string());
  if (!(s = apply_weights_arg(args.get("weights"), &dir))) return fail("run", s.to_string());
  std::unique_ptr<Model> model;
  RuntimeOptions options;
  options.threads = static_cast<int>(threads);
  if (!(s = parse_precision_arg(args.get("precision"), &options.precision))) return fail("run", s.message());
  if (!(s = Model::load(dir, options, cpu_kernels_factory(), &model))) return fail("run", s.to_string());
  std::unique_ptr<Tokenizer> tokenizer;
  Status tok_status = load_model_tokenizer(dir, &tokenizer);

  std::vector<int32_t> prompt;
  if (args.has("prompt")) {
    if (!tok_status) return fail("run", "--prompt needs the checkpoint's tokenizer: " + tok_status.to_string());
    prompt = tokenizer->encode(args.get("prompt"));
    if (prompt.empty()) return fail("run", "--prompt encodes to no tokens");
  } else {
    std::vector<int64_t> ids;
    if (!(s = parse_int_list("prompt-ids", args.get("prompt-ids"), 0, INT32_MAX, &ids))) return fail("run", s.message());
    prompt.assign(ids.begin(), ids.end());
  }
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (f.split_at >= n) return fail("run", "--split-at must be below the prompt length " + std::to_string(n));

  // Prompt rows for --logits-out; negative counts from the end.
  std::vector<int64_t> rows{n - 1};
  if (args.has("logits-rows")) {
    rows.clear();
    if (!(s = parse_int_list("logits-rows", args.get("logits-rows"), -n, n - 1, &rows))) return fail("run", s.message());
    for (int64_t& r : rows) r = r < 0 ? n + r : r;
    if ((f.split_at > 0 || args.has("restore")) && std::any_of(rows.begin(), rows.end(), [n](int64_t r) { return r != n - 1; }))
      return fail("run", "--split-at and --restore give the last prompt row only (--logits-rows -1)");
  }
  LogitsFile logits_out;
  if (!(s = logits_out.open(args.get("logits-out")))) return fail("run", s.message());
  if (tok_status && !logits_out.on()) f.stops = tokenizer->stop_tokens();

  TokenPrinter printer(tok_status ? tokenizer.get() : nullptr, f.print_ids);
  s = args.has("restore") ? run_restored(*model, prompt, f, logits_out, printer)
                          : run_direct(*model, prompt, rows, f, logits_out, printer);
  if (s) s = logits_out.close();
  if (!s) return fail("run", s.to_string());
  return 0;
}

}  // namespace sb
