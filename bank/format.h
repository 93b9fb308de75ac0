// The on-disk object format of the SSD tier, version 2: a 160-byte header
// (magic "STBANKOB", version, kinds, key, parent, counts, schema digest,
// XXH3-64 of the payload and of the header) then the payload (part table,
// token ids, part data), all integers little-endian. The specification is
// docs/bank-format.md; this file and that one change together.
// Every function here is pure (no I/O) and thread-safe. decode_* accept any
// bytes at all: whatever they are given, they return a Status and never read
// outside the span (fuzz/format_fuzz.cpp exercises this).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bank/key.h"
#include "bank/object.h"
#include "bank/tier.h"
#include "common/status.h"
#include "runtime/state.h"

namespace sb {

// One version for the keys and the files (bank/key.h): a file of another
// version names its object by another key function.
constexpr uint32_t kObjectFormatVersion = kBankFormatVersion;
constexpr size_t kObjectHeaderBytes = 160;
constexpr char kObjectMagic[8] = {'S', 'T', 'B', 'A', 'N', 'K', 'O', 'B'};
// Sanity limits: a header asking for more is corrupt, not a reason to allocate.
constexpr uint32_t kMaxParts = 1u << 16;
constexpr uint32_t kMaxTokens = 1u << 24;
constexpr uint64_t kMaxPayloadBytes = 1ull << 40;

struct ObjectHeader {
  uint32_t version = kObjectFormatVersion;
  uint32_t incompat_flags = 0;  // a reader rejects a file with bits it does not know
  uint32_t compat_flags = 0;    // a reader ignores bits it does not know
  ObjectKind kind = ObjectKind::kBlock;
  Retention retention = Retention::kBlock;
  uint8_t dtype = 1;  // DType of the parts: 1 = f32, 2 = bf16
  Key key, parent;
  int64_t position = 0;
  uint32_t n_tokens = 0;
  uint32_t n_parts = 0;
  uint64_t payload_bytes = 0;
  uint64_t schema_digest = 0;  // 0: written without a schema
  uint64_t payload_checksum = 0;

  uint64_t file_bytes() const { return kObjectHeaderBytes + payload_bytes; }
};

// A digest of the schema's stable description (StateSchema::describe()).
uint64_t schema_digest(const StateSchema& schema);

// Serialises an object into one contiguous file image.
std::vector<uint8_t> encode_object(const Object& object, Retention retention, uint64_t schema_digest);

// Parses and checks the header (the first kObjectHeaderBytes of `bytes`).
// kUnsupported: a version newer than this reader, or unknown incompatible
// flags (the file is left alone). kCorruption: anything else wrong, an older
// version included (each version has its own directory, so an older file
// where this version's files live has been put there by damage).
Status decode_header(std::span<const uint8_t> bytes, ObjectHeader* out);

// Parses a whole file image: header, exact size, payload checksum, part
// table and tokens. On success *out holds the object.
Status decode_object(std::span<const uint8_t> bytes, ObjectHeader* header, Object* out);

// Checks an object's parts against a schema: a block has one part per
// sequence/pooled component with the rows its token range needs; a snapshot
// has one part per recurrent component with its whole state; sizes in bytes
// of the components' dtype, which must be the object's.
Status check_shapes(const Object& object, const StateSchema& schema);

// Bytes an object occupies in its file (header included).
uint64_t encoded_size(const Object& object);

// File names: "<64 hex digits of the key>.blk" or ".snp". Temporary files
// add ".tmp-<anything>" after that.
std::string object_file_name(ObjectKind kind, const Key& key);
enum class NameType { kObject, kTemporary, kForeign };
NameType parse_object_file_name(std::string_view name, ObjectKind* kind, Key* key);
const char* kind_tag(ObjectKind kind);  // "block", "snapshot"

}  // namespace sb
