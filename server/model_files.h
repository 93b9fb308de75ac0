// The tokenizer and chat template of a --model: a checkpoint directory's
// tokenizer.json / tokenizer_config.json (or chat_template.jinja), or a GGUF
// file's tokenizer.ggml.* and tokenizer.chat_template (model/gguf_vocab.h).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace sb {

Status load_model_tokenizer(const std::string& model, std::unique_ptr<Tokenizer>* out);
Status load_model_chat_template(const std::string& model, ChatTemplate* out);

}  // namespace sb
