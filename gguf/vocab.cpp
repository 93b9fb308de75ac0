#include "gguf/vocab.h"

#include <nlohmann/json.hpp>

namespace sb {

namespace {

using nlohmann::ordered_json;

// The split patterns of the two pre-tokenizers, as their tokenizer.json files spell them.
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr int64_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

}  // namespace

Status gguf_tokenizer_json(const GgufFile& g, std::string* out) {
  std::string model, pre;
  SB_RETURN_IF_ERROR(g.get_string("tokenizer.ggml.model", &model));
  if (model != "gpt2")
    return Status::unsupported("file " + g.file() + ": tokenizer.ggml.model is '" + model +
                               "'; statebank reads byte-level BPE (gpt2)");
  SB_RETURN_IF_ERROR(g.get_string("tokenizer.ggml.pre", &pre));
  if (pre != "qwen2" && pre != "qwen35")
    return Status::unsupported("file " + g.file() + ": tokenizer.ggml.pre is '" + pre + "'; qwen2 and qwen35 are read");
  const GgufValue *tokens, *types, *merges;
  SB_RETURN_IF_ERROR(g.get_array("tokenizer.ggml.tokens", "string", &tokens));
  SB_RETURN_IF_ERROR(g.get_array("tokenizer.ggml.token_type", "integer", &types));
  SB_RETURN_IF_ERROR(g.get_array("tokenizer.ggml.merges", "string", &merges));
  if (types->ints.size() != tokens->strings.size())
    return Status::corruption("file " + g.file() + ": tokenizer.ggml.token_type has " +
                              std::to_string(types->ints.size()) + " entries for " +
                              std::to_string(tokens->strings.size()) + " tokens");
  // A plain (sorted) object: ordered_json finds a key by a linear search.
  nlohmann::json vocab = nlohmann::json::object();
  ordered_json added = ordered_json::array();
  for (size_t i = 0; i < tokens->strings.size(); ++i) {
    const std::string& text = tokens->strings[i];
    const int64_t type = types->ints[i];
    if (type == kNormal) {
      vocab[text] = i;
    } else if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", i},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type == kControl}});
    } else if (type != kUnused) {
      return Status::unsupported("file " + g.file() + ": token " + std::to_string(i) +
                                 " has tokenizer.ggml.token_type " + std::to_string(type) +
                                 " (normal, control, user-defined and unused are read)");
    }
  }
  ordered_json j;
  j["version"] = "1.0";
  j["added_tokens"] = std::move(added);
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"Regex", pre == "qwen35" ? kQwen35Pattern : kQwen2Pattern}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", merges->strings}};
  *out = j.dump();
  return Status::ok();
}

Status gguf_tokenizer_config_json(const GgufFile& g, std::string* out) {
  std::string tmpl;
  SB_RETURN_IF_ERROR(g.get_string("tokenizer.chat_template", &tmpl));
  ordered_json cfg;
  cfg["chat_template"] = tmpl;
  const GgufValue* tokens = nullptr;
  if (g.find("tokenizer.ggml.tokens")) SB_RETURN_IF_ERROR(g.get_array("tokenizer.ggml.tokens", "string", &tokens));
  for (auto [gguf_key, name] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"},
                                {"tokenizer.ggml.eos_token_id", "eos_token"},
                                {"tokenizer.ggml.padding_token_id", "pad_token"}}) {
    int64_t id = -1;
    if (!tokens || !g.find(gguf_key)) continue;
    SB_RETURN_IF_ERROR(g.get_int(gguf_key, &id));
    if (id < 0 || id >= static_cast<int64_t>(tokens->strings.size()))
      return Status::corruption("file " + g.file() + ": " + gguf_key + " " + std::to_string(id) + " names no token");
    cfg[name] = tokens->strings[static_cast<size_t>(id)];
  }
  *out = cfg.dump();
  return Status::ok();
}

}  // namespace sb
