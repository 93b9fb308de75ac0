// Tokenizer: the byte-level BPE of the Qwen families, loaded from a
// checkpoint's tokenizer.json, giving the same ids as Hugging Face tokenizers
// (encode's steps as HF takes them: docs/text.md, "Tokenizer").
// Contract:
//  - encode(text) repairs invalid UTF-8, cuts added tokens out first (the
//    special ones only with parse_special), then normalises, pre-splits and
//    merges by BPE rank; no BOS/EOS is added;
//  - decode(ids): the token bytes repaired to valid UTF-8; ids that name no
//    token are skipped (decode_checked() reports them);
//  - the boundary property the engine relies on: at any offset `o` where an
//    added token starts or ends, encode(t) == encode(t[0:o]) + encode(t[o:]).
// Thread-safety: immutable after load(); every const method may run on many
// threads at once (encode() keeps a bounded per-thread word cache).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sb {

struct AddedToken {
  int32_t id;
  std::string content;
  bool special;  // false for <think>, <tool_call>, ... (still matched atomically)
};

class Tokenizer {
 public:
  ~Tokenizer();

  // Reads <model_dir>/tokenizer.json. A missing or malformed file, or a model
  // this class does not implement (not BPE, byte fallback, other
  // normalizers/pre-tokenizers), is an error naming the file.
  static Status load(const std::string& model_dir, std::unique_ptr<Tokenizer>* out);
  static Status load_file(const std::string& tokenizer_json_path, std::unique_ptr<Tokenizer>* out);
  // The same from tokenizer.json text; `source` names it in errors.
  static Status load_json(const std::string& text, const std::string& source, std::unique_ptr<Tokenizer>* out);
  // What the calling thread's word cache holds, estimated in bytes (keys, ids
  // and the map's nodes); never much above 8 MiB.
  static size_t word_cache_bytes();

  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  std::string decode(std::span<const int32_t> ids) const;
  // As decode(), but an id that names no token is an error naming the id.
  Status decode_checked(std::span<const int32_t> ids, std::string* out) const;

  // One past the largest token id (BPE vocabulary plus added tokens). The
  // model's embedding table may be larger (padding rows).
  int64_t vocab_size() const;
  bool is_valid_id(int32_t id) const;
  // Id of an added token by its content ("<|im_end|>"), or of a vocabulary
  // entry by its tokenizer.json spelling ("Ġthe"); nullopt if neither.
  std::optional<int32_t> token_id(std::string_view piece) const;
  // Raw bytes of a token (may be part of a UTF-8 character); empty for an
  // invalid id.
  std::string_view token_bytes(int32_t id) const;
  bool is_added(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;
  // <|im_end|> and <|endoftext|>, those of them that exist.
  std::vector<int32_t> stop_tokens() const;

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Streams decoded text token by token without ever emitting half a UTF-8
// character: bytes of an incomplete character are held until the next token
// completes it. Invalid bytes come out as U+FFFD as soon as they are known to
// be invalid. The concatenation of every push() and the final flush() equals
// Tokenizer::decode() of the same ids. Not thread-safe (one per stream); the
// Tokenizer must outlive it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tok_(&tokenizer) {}
  std::string push(int32_t id);
  std::string flush();
  // Bytes held back, waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  std::string pending_;
};

}  // namespace sb
