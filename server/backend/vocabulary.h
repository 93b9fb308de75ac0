// make_vocabulary: the constrain::Vocabulary a backend's grammars mask
// over, built once from its tokenizer (server/protocols/decoding_rules.h
// applies the masks).
#pragma once

#include <cstdint>
#include <memory>

#include "constrain/constraint.h"
#include "tokenizer/tokenizer.h"

namespace sb {

// The vocabulary a grammar masks over: every token's bytes, special tokens
// (<|im_start|>, <|im_end|>, ...) never produced by a grammar, padding rows
// of a larger embedding table empty; the tokenizer's stop tokens end a
// complete output.
std::shared_ptr<const constrain::Vocabulary> make_vocabulary(const Tokenizer& tokenizer, int64_t logits_size);

}  // namespace sb
