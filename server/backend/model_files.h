// The tokenizer and chat template of a --model: a checkpoint directory's
// tokenizer.json / tokenizer_config.json (or chat_template.jinja), or a GGUF
// file's tokenizer.ggml.* and tokenizer.chat_template (gguf/vocab.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace sb {

// The model's recommended sampling, used for each field a request leaves
// out (server/protocols/request_parse.h, apply_sampling_defaults). Unset
// fields keep the API's own defaults (greedy: temperature 0).
struct SamplingDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty;
  std::optional<int> top_k;
};

Status load_model_tokenizer(const std::string& model, std::unique_ptr<Tokenizer>* out);
Status load_model_chat_template(const std::string& model, ChatTemplate* out);
// The model's recommended sampling: a checkpoint's generation_config.json
// (temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty;
// `do_sample: false` is greedy, as in transformers), or a GGUF file's
// general.sampling.* keys (llama.cpp's: temp, top_p, top_k, min_p,
// penalty_repeat). What the model does not give stays unset; no file, no
// defaults. A value of the wrong type or out of the API's range is an error
// naming the file and key.
Status load_sampling_defaults(const std::string& model, SamplingDefaults* out);

}  // namespace sb
