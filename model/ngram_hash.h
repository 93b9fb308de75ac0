// The hash constants of qwen4exp's PLE n-gram layer (docs/model-spec.md,
// "qwen4exp"): which rows of the one n-gram table a token's 2- and 3-grams
// read. Everything follows from the config (vocab size, seed, base vocabulary
// per head, padding divisor); a checkpoint also stores the constants as I64
// tensors and a GGUF file as metadata, and the loaders check that they agree.
//
// Pure functions of their arguments: any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace sb {

struct NgramHash {
  std::vector<int64_t> multipliers;  // ngram_size odd multipliers, one per position in the n-gram
  std::vector<int64_t> head_vocab;   // per head ((ngram_size - 1) * heads_per_ngram heads): a distinct prime
  std::vector<int64_t> head_offset;  // per head: its first row in the table
  int64_t table_rows = 0;            // all heads' rows, padded to a multiple of ngram_vocab_divisor
};

// The constants of PLE layer number `ple_index` (its place in
// config.ple_layers, not its layer index).
NgramHash ngram_hash(const ModelConfig& config, int64_t ple_index);

// The table rows token t reads, given its own id and its two predecessors'
// (context[0] = the token before, context[1] = the one before that; a
// position before the sequence or behind an end-of-sequence token reads as
// the eos id: see ngram_context). rows gets one entry per head, 2-grams first.
void ngram_rows(const NgramHash& hash, int64_t heads_per_ngram, int64_t token, const int64_t* context, int64_t* rows);

// The context ids of the token after `history` (the ids so far, oldest
// first): the last ngram_size - 1 ids, newest first, where every id at or
// before the latest eos, and every position before the start, reads as eos.
void ngram_context(const int64_t* history, int64_t n, int64_t context_len, int64_t eos, int64_t* context);

}  // namespace sb
