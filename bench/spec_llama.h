// llama.cpp's n-gram decoding beside `statebank bench spec`'s n-gram row:
// the same prompt (token ids), the same greedy decode length and the same
// weights (the bench's checkpoint as a BF16 GGUF), run through
// tools/bench/spec_llama.py on llama-server --spec-type ngram-simple.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sb {

struct LlamaSpecRow {
  std::string skipped;                              // why it did not run (llama.cpp absent, ...); empty when it ran
  double tokens_per_s = 0, plain_tokens_per_s = 0;  // decode tokens/s with and without n-gram drafts
  int64_t drafted = 0, accepted = 0;
  std::string flags;  // llama-server's speculative flags
  double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0; }
};

struct LlamaSpecJob {
  std::string llama_bin;   // llama.cpp's build/bin
  std::string checkpoint;  // the bench's checkpoint directory
  std::string work;        // where the GGUF is cached
  std::vector<int32_t> prompt;
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits, as DecodingRules does
  int64_t decode_tokens = 0;
  int threads = 2, reps = 2, draft_max = 4;
};

// Never fails: a run that cannot happen says why in `skipped`.
LlamaSpecRow run_llama_ngram(const LlamaSpecJob& job);
// SB_LLAMA_DIR's build/bin, else /work/cache/llama.cpp/build/bin (tools/llama/env.sh).
std::string default_llama_bin();

}  // namespace sb
