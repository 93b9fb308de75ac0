// llama_mtp: llama.cpp's side of the MTP head cross-check
// (tools/xcheck/mtp_check.py, docs/xcheck.md); tests/model/mtp_logits.cpp is
// statebank's, with the same flags, the same protocol (described there) and
// the same output. Built against the cached llama.cpp tree by
// tools/xcheck/build_llama_logits.sh, never part of statebank's build.
//
//   llama_mtp --model FILE.gguf --prompt-ids 1,2,3 [--steps S] [--depth D]
//             [--prompt-rows 0|1] [--target-ids IDS] [--threads T] --logits-out FILE
//
// The head runs as llama.cpp's draft-mtp drives it (common/speculative.cpp):
// the model loaded with its nextn block, a second context of type
// LLAMA_CONTEXT_TYPE_MTP beside the target's (ctx_other), nextn embeddings
// on in both (the target's for every row, the head's for rows with logits),
// and batches carrying both a token and a hidden row per position. The
// target's hidden rows come from its own decode calls; rows the protocol
// drops are removed with llama_memory_seq_rm. KV caches f32, flash attention
// off: an F32 file runs in fp32 throughout.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"
#include "src/llama-ext.h"
#include "tools/xcheck/llama_session.h"
#include "tools/xcheck/mtp_args.h"

namespace {

constexpr const char* kTool = "llama_mtp";

[[noreturn]] void die(const std::string& message) { xcheck::die(kTool, message); }

using xcheck::argmax;

using Flags = xcheck::MtpFlags;

// A batch of rows with both a token and a hidden row (the head's input), as
// the draft-mtp driver builds it.
struct HeadBatch {
  llama_batch b;
  int n_embd;
  HeadBatch(int capacity, int embd) : n_embd(embd) {
    b = llama_batch_init(capacity, embd, 1);
    b.token = static_cast<llama_token*>(std::malloc(sizeof(llama_token) * static_cast<size_t>(capacity)));
  }
  ~HeadBatch() {
    std::free(b.token);
    b.token = nullptr;
    llama_batch_free(b);
  }
  void clear() { b.n_tokens = 0; }
  void add(llama_token t, llama_pos pos, const float* h, bool logits) {
    const int i = b.n_tokens++;
    b.token[i] = t;
    b.pos[i] = pos;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = logits;
    std::memcpy(b.embd + static_cast<size_t>(i) * n_embd, h, sizeof(float) * static_cast<size_t>(n_embd));
  }
};

llama_context* new_context(llama_model* model, const Flags& f, int n_ctx, llama_context* target) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n_ctx);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n_ctx);
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = f.threads;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  if (target) {
    cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    cp.ctx_other = target;
    cp.n_rs_seq = 0;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) die(target ? "cannot create the MTP context" : "cannot create a context");
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = xcheck::parse_mtp_flags(kTool, argc, argv);
  std::vector<llama_token> tokens = f.prompt;
  // The target's token of step s: forced, else its greedy choice.
  auto next = [&](int s, llama_token greedy) { return f.forced.empty() ? greedy : f.forced[static_cast<size_t>(s)]; };
  const int n = static_cast<int>(tokens.size());

  llama_model* model = xcheck::load_cpu_model(kTool, f.model, /*load_mtp=*/true);
  if (llama_model_n_layer_nextn(model) != 1) die(f.model + " has no single nextn block");
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const int H = llama_model_n_embd_out(model);
  const int n_ctx = n + f.steps + f.depth + 16;
  llama_context* tgt = new_context(model, f, n_ctx, nullptr);
  llama_context* dft = new_context(model, f, n_ctx, tgt);
  llama_set_embeddings_nextn(tgt, true, /*masked=*/false);
  llama_set_embeddings_nextn(dft, true, /*masked=*/true);

  // The target: h_{-1} = 0, then h_j for every position, and its greedy tokens.
  std::vector<float> h(static_cast<size_t>(H), 0.0f);
  {
    llama_batch batch = xcheck::prompt_batch(tokens);
    if (llama_decode(tgt, batch) != 0) die("prefill failed");
    const float* rows = llama_get_embeddings_nextn(tgt);
    h.insert(h.end(), rows, rows + static_cast<size_t>(n) * H);
    tokens.push_back(next(0, argmax(llama_get_logits_ith(tgt, n - 1), vocab)));
    llama_batch_free(batch);
  }
  for (int s = 1; s < f.steps; ++s) {
    llama_token t = tokens.back();
    if (llama_decode(tgt, llama_batch_get_one(&t, 1)) != 0) die("decode failed");
    const float* row = llama_get_embeddings_nextn(tgt);
    h.insert(h.end(), row, row + H);
    tokens.push_back(next(s, argmax(llama_get_logits_ith(tgt, -1), vocab)));
  }
  auto row = [&](int j) { return h.data() + static_cast<size_t>(j) * H; };

  std::FILE* file = std::fopen(f.out.c_str(), "wb");
  if (!file) die("cannot create " + f.out);
  llama_memory_t mem = llama_get_memory(dft);
  HeadBatch batch(n_ctx, H);
  int seen = f.prompt_rows ? 0 : n;  // the next position whose pair the head has not seen
  std::string drafts;
  for (int s = 0; s < f.steps; ++s) {
    const int p = n + s;
    // As the driver: pairs not seen yet in a batch without outputs (its
    // process()), then the draft's first row alone (its draft()).
    batch.clear();
    for (int j = seen; j < p; ++j) batch.add(tokens[static_cast<size_t>(j)], j, row(j), false);
    if (batch.b.n_tokens > 0 && llama_decode(dft, batch.b) != 0) die("MTP decode of the seen pairs failed");
    batch.clear();
    batch.add(tokens[static_cast<size_t>(p)], p, row(p), true);
    std::string line;
    for (int d = 0; d < f.depth; ++d) {
      if (llama_decode(dft, batch.b) != 0) die("MTP decode failed at position " + std::to_string(p + d));
      const float* logits = llama_get_logits_ith(dft, batch.b.n_tokens - 1);
      if (std::fwrite(logits, sizeof(float), static_cast<size_t>(vocab), file) != static_cast<size_t>(vocab))
        die("write failed");
      const llama_token draft = argmax(logits, vocab);
      if (d > 0) line += ',';
      line += std::to_string(draft);
      const std::vector<float> hidden(llama_get_embeddings_nextn_ith(dft, batch.b.n_tokens - 1),
                                      llama_get_embeddings_nextn_ith(dft, batch.b.n_tokens - 1) + H);
      batch.clear();
      batch.add(draft, p + 1 + d, hidden.data(), true);
    }
    drafts += line + "\n";
    // The draft's deeper rows go; its first, the pair (h_{p-1}, t_p), stays.
    llama_memory_seq_rm(mem, 0, p + 1, -1);
    seen = p + 1;
  }
  if (std::fclose(file) != 0) die("writing " + f.out + " failed");
  for (size_t i = static_cast<size_t>(n); i < tokens.size(); ++i)
    std::printf("%s%d", i > static_cast<size_t>(n) ? "," : "", tokens[i]);
  std::printf("\n%s", drafts.c_str());
  llama_free(dft);
  llama_free(tgt);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
