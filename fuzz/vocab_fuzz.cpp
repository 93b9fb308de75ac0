// libFuzzer target: a GGUF file's tokenizer metadata (gguf/vocab.h)
// made into a tokenizer and a chat template, as `serve` does with a GGUF
// model (server/backend/model_files.cpp). The input is a GGUF file; fuzz/corpus-vocab/
// holds files with only tokenizer.* metadata (fuzz/make_vocab_corpus.py):
// healthy, deep templates, invalid UTF-8, inconsistent lists. Errors are
// fine; a crash, an escaped exception, a leak or a stack overflow is not.
// Run by tools/fuzz.sh under ASan and UBSan.
#include <cstdint>
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "gguf/vocab.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<sb::GgufFile> g;
  if (!sb::GgufFile::parse(data, size, "fuzz.gguf", &g).is_ok()) return 0;
  std::string json;
  if (sb::gguf_tokenizer_json(*g, &json).is_ok()) {
    std::unique_ptr<sb::Tokenizer> tok;
    if (sb::Tokenizer::load_json(json, "fuzz.gguf", &tok).is_ok()) {
      std::vector<int32_t> ids = tok->encode("Hello <|im_start|> the wörld 123\n", true);
      (void)tok->decode(ids);
    }
  }
  if (sb::gguf_tokenizer_config_json(*g, &json).is_ok()) {
    sb::ChatTemplate t;
    (void)sb::ChatTemplate::from_config_json(json, "fuzz.gguf", &t);
  }
  return 0;
}
