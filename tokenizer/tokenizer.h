// Tokenizer: the byte-level BPE of the Qwen families, loaded from a
// checkpoint's tokenizer.json, giving the same ids as Hugging Face tokenizers.
//
// encode(text):
//   1. Invalid UTF-8 is first repaired (one U+FFFD per ill-formed subpart), as
//      a Rust String built with from_utf8_lossy would be.
//   2. Added tokens are cut out verbatim, leftmost-longest, before anything
//      else (they are stored with normalized=false). With parse_special=false
//      the tokens flagged "special" (<|im_start|>, <|endoftext|>, ...) are left
//      in the text as ordinary characters, while the non-special added tokens
//      (<think>, <tool_call>, ...) are still matched, exactly like HF's
//      split_special_tokens=True.
//   3. Each remaining segment is NFC-normalised (utf8proc), split by the
//      pre-tokenizer regex (split_regex.h), and each piece's bytes are merged
//      by BPE rank (lowest rank first, leftmost on ties). No BOS/EOS is added.
// decode(ids): the concatenated token bytes, repaired to valid UTF-8 (so a
//   sequence cut inside a character shows U+FFFD; StreamDecoder avoids that).
//   Ids that name no token are skipped; decode_checked() reports them.
//
// Boundary property (engine relies on it): because an added token is always a
// piece of its own, for any offset `o` at which an added token starts (or
// ends), encode(t) == encode(t[0:o]) + encode(t[o:]). RenderedChat's
// final_user_offset is such an offset.
//
// Thread-safety: after load() a Tokenizer is immutable; every const method
// may be called from many threads at once. encode() keeps a per-thread word
// cache (no locks; a thread caches one tokenizer at a time, up to 128k words
// and about 8 MiB, then starts over).
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
