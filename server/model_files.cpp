#include "server/model_files.h"

#include "model/gguf_model.h"
#include "model/gguf_vocab.h"

namespace sb {

// Both read the GGUF file's metadata alone: no digest, which would read
// every byte of the weights (seconds for a file of gigabytes).
Status load_model_tokenizer(const std::string& model, std::unique_ptr<Tokenizer>* out) {
  if (!is_gguf_path(model)) return Tokenizer::load(model, out);
  std::unique_ptr<GgufFile> g;
  SB_RETURN_IF_ERROR(GgufFile::open(model, &g, GgufFile::Digest::kNo));
  std::string json;
  SB_RETURN_IF_ERROR(gguf_tokenizer_json(*g, &json));
  return Tokenizer::load_json(json, model + " (tokenizer.ggml.*)", out);
}

Status load_model_chat_template(const std::string& model, ChatTemplate* out) {
  if (!is_gguf_path(model)) return ChatTemplate::load(model, out);
  std::unique_ptr<GgufFile> g;
  SB_RETURN_IF_ERROR(GgufFile::open(model, &g, GgufFile::Digest::kNo));
  std::string json;
  SB_RETURN_IF_ERROR(gguf_tokenizer_config_json(*g, &json));
  return ChatTemplate::from_config_json(json, model + " (tokenizer.chat_template)", out);
}

}  // namespace sb
