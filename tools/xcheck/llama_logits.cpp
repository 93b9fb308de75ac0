// llama_logits: llama.cpp's side of the cross-check (tools/xcheck/run.py).
// Built against the cached llama.cpp tree by tools/xcheck/build_llama_logits.sh,
// never part of statebank's own build.
//
//   llama_logits --model FILE.gguf --prompt-ids 1,2,3 [--rows 0,63,-1]
//                [--max-tokens N] [--threads T] [--logits-out FILE] [--kv f32|f16|bf16]
//                [--ubatch K]
//
// Prefills the prompt in one llama_decode call (logits requested for --rows
// only, default the last), then draws N tokens greedily (argmax, the lowest id
// on a tie), feeding each back one at a time. Prints the generated ids, comma
// separated, on stdout. --logits-out gets the same layout as
// `statebank run --logits-out`: raw float32 rows of n_vocab values, the
// prompt rows in --rows order, then one row per decode step.
// The KV cache is f32 and flash attention off unless told otherwise, so that
// an F32 GGUF runs in fp32 throughout. --ubatch K has llama.cpp split that
// call into micro-batches of K rows (K = 1: the prompt through its one-row
// products, as a decode step): llama.cpp's results for the same file and
// prompt under another split.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"
#include "tools/xcheck/llama_session.h"
#include "tools/xcheck/tool_args.h"

namespace {

constexpr const char* kTool = "llama_logits";

[[noreturn]] void die(const std::string& message) { xcheck::die(kTool, message); }

std::vector<long long> parse_list(const std::string& flag, const std::string& text) {
  return xcheck::parse_list(kTool, flag, text);
}

using xcheck::argmax;

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, ids_text, rows_text = "-1", out_path, kv = "f32";
  int max_tokens = 32, threads = 2, ubatch = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) die(flag + " wants a value");
    const std::string value = argv[++i];
    if (flag == "--model")
      model_path = value;
    else if (flag == "--prompt-ids")
      ids_text = value;
    else if (flag == "--rows")
      rows_text = value;
    else if (flag == "--max-tokens")
      max_tokens = std::atoi(value.c_str());
    else if (flag == "--threads")
      threads = std::atoi(value.c_str());
    else if (flag == "--logits-out")
      out_path = value;
    else if (flag == "--kv")
      kv = value;
    else if (flag == "--ubatch")
      ubatch = std::atoi(value.c_str());
    else
      die("unknown flag " + flag);
  }
  if (model_path.empty() || ids_text.empty()) die("--model and --prompt-ids are required");
  if (max_tokens < 1 || threads < 1 || ubatch < 0)
    die("--max-tokens and --threads must be positive, --ubatch not negative");
  const ggml_type kv_type = kv == "f32"    ? GGML_TYPE_F32
                            : kv == "f16"  ? GGML_TYPE_F16
                            : kv == "bf16" ? GGML_TYPE_BF16
                                           : (die("--kv: f32, f16 or bf16"), GGML_TYPE_F32);
  std::vector<llama_token> prompt;
  for (long long v : parse_list("--prompt-ids", ids_text)) prompt.push_back(static_cast<llama_token>(v));
  const int n = static_cast<int>(prompt.size());
  std::vector<int> rows;
  for (long long r : parse_list("--rows", rows_text)) {
    if (r < -n || r >= n) die("--rows: " + std::to_string(r) + " is outside the prompt");
    rows.push_back(static_cast<int>(r < 0 ? n + r : r));
  }

  llama_model* model = xcheck::load_cpu_model(kTool, model_path, /*load_mtp=*/false);
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n + max_tokens + 16);
  cp.n_batch = static_cast<uint32_t>(n);
  cp.n_ubatch = static_cast<uint32_t>(ubatch > 0 && ubatch < n ? ubatch : n);
  cp.n_seq_max = 1;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.type_k = kv_type;
  cp.type_v = kv_type;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) die("cannot create a context");

  std::FILE* out = nullptr;
  if (!out_path.empty() && !(out = std::fopen(out_path.c_str(), "wb"))) die("cannot create " + out_path);
  auto write_row = [&](const float* row) {
    if (out && std::fwrite(row, sizeof(float), static_cast<size_t>(vocab), out) != static_cast<size_t>(vocab))
      die("writing " + out_path + " failed");
  };

  // Prefill: one batch, outputs for the requested rows and the last one.
  llama_batch batch = xcheck::prompt_batch(prompt);
  for (int r : rows) batch.logits[r] = 1;
  if (llama_decode(ctx, batch) != 0) die("prefill failed");
  // llama_get_logits_ith takes the row's index in the batch.
  for (int r : rows) write_row(llama_get_logits_ith(ctx, r));
  int token = argmax(llama_get_logits_ith(ctx, n - 1), vocab);
  llama_batch_free(batch);

  std::printf("%d", token);
  for (int step = 1; step < max_tokens; ++step) {
    llama_token t = token;
    llama_batch one = llama_batch_get_one(&t, 1);
    if (llama_decode(ctx, one) != 0) die("decode step " + std::to_string(step) + " failed");
    const float* row = llama_get_logits_ith(ctx, -1);
    write_row(row);
    token = argmax(row, vocab);
    std::printf(",%d", token);
  }
  std::printf("\n");
  if (out && std::fclose(out) != 0) die("writing " + out_path + " failed");
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
