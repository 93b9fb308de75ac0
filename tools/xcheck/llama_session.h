// What the cross-check's two llama.cpp programs (tools/xcheck/llama_logits.cpp
// and tools/xcheck/llama_mtp.cpp) do alike: load a GGUF file on the CPU with
// llama.cpp's log quiet but for errors, pick the greedy token, and build the
// prompt's batch. Header-only, as they share no library; built only against
// the cached llama.cpp tree (tools/xcheck/build_llama_logits.sh).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "llama.h"
#include "tools/xcheck/tool_args.h"

namespace xcheck {

// The greedy token of a row of logits: its largest value, the lowest id on a tie.
inline int argmax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// Starts llama.cpp's backend and loads `path` with no layer offloaded (with
// its nextn block where `load_mtp`); a file that does not load ends the
// program with a message. The caller frees the model and the backend.
inline llama_model* load_cpu_model(const char* tool, const std::string& path, bool load_mtp) {
  llama_log_set(
      [](ggml_log_level level, const char* text, void*) {
        if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
      },
      nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mtp = load_mtp;
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (!model) die(tool, "cannot load " + path);
  return model;
}

// One batch of the whole prompt in sequence 0, positions 0.., logits
// requested for its last row only; the caller frees it (llama_batch_free).
inline llama_batch prompt_batch(const std::vector<llama_token>& prompt) {
  const int n = static_cast<int>(prompt.size());
  llama_batch batch = llama_batch_init(n, 0, 1);
  batch.n_tokens = n;
  for (int i = 0; i < n; ++i) {
    batch.token[i] = prompt[static_cast<size_t>(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = i == n - 1;
  }
  return batch;
}

}  // namespace xcheck
