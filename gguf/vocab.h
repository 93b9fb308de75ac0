// The tokenizer and chat template of a GGUF file, given back in the form of
// a checkpoint's files so that the one tokenizer and template loader
// (tokenizer/) reads them: tokenizer.ggml.* as a tokenizer.json text, and
// tokenizer.chat_template with the special tokens as a tokenizer_config.json
// text.
//
// Accepted: tokenizer.ggml.model gpt2 (byte-level BPE) with pre qwen2 (the
// Qwen2/Qwen3 split pattern) or qwen35 (Qwen3.5's, letters take combining
// marks). Token types: normal entries form the vocabulary, control tokens
// are special added tokens, user-defined ones non-special added tokens,
// unused ones ([PADi]) are left out. Anything else is an error naming the key.
#pragma once

#include <string>

#include "common/status.h"
#include "gguf/gguf.h"

namespace sb {

Status gguf_tokenizer_json(const GgufFile& file, std::string* out);
// not_found when the file has no tokenizer.chat_template.
Status gguf_tokenizer_config_json(const GgufFile& file, std::string* out);

}  // namespace sb
