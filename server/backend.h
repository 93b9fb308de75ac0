// Backend: everything the HTTP layer needs from a model, its tokenizer and
// the bank, behind one interface, so routes, scheduling and limits are
// tested without a model (tests/server) and the real one is a thin adapter
// (server/engine_backend.h).
//
// Thread safety: every method may be called from many threads at once.
// TextStream and ChatOutput objects belong to one request (one thread at a
// time).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "constrain/constraint.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace sb {

struct ChatParams;

// Token ids to UTF-8 text, incrementally: push() returns the text completed
// by this token (bytes of an unfinished character are held back).
class TextStream {
 public:
  virtual ~TextStream() = default;
  virtual std::string push(int32_t token) = 0;
  virtual std::string finish() = 0;  // what is held back, if anything
};

struct GeneratedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON text
};

struct ChatDelta {
  std::string content;
  std::string reasoning;
  std::vector<GeneratedToolCall> tool_calls;  // complete calls, in order
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

// Splits a chat model's generated text into content, reasoning and tool calls.
class ChatOutput {
 public:
  virtual ~ChatOutput() = default;
  virtual ChatDelta push(const std::string& text) = 0;
  virtual ChatDelta finish() = 0;
};

struct ChatPrompt {
  std::vector<int32_t> ids;
  int64_t message_boundary = -1;  // first token of the final user message, or -1
  bool opens_thinking = false;    // the prompt leaves a <think> open: output starts as reasoning
  ChatFlavour flavour = ChatFlavour::kQwen3Json;  // the template's tool-call syntax
};

// Bank statistics as /metrics prints them.
struct BankTierStats {
  TierKind tier = TierKind::kRam;                // its label: tier_kind_name(tier)
  std::map<std::string, uint64_t> bytes;         // by object kind ("block", "snapshot")
  std::map<std::string, uint64_t> objects;       // by object kind
  uint64_t evictions = 0;
  uint64_t quarantined = 0;  // objects taken out after a failed check
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
};

// The remote tier's health, when one is configured.
struct RemoteTierView {
  bool available = false;  // the circuit breaker is closed
  uint64_t trips = 0, timeouts = 0, failures = 0, skipped_calls = 0;
  uint64_t wire_bytes_sent = 0, wire_bytes_received = 0;
  uint64_t dropped_puts = 0, write_errors = 0;
  uint64_t mac_failures = 0;  // values whose MAC was missing or wrong (never installed)
};

struct BankStatsView {
  std::vector<BankTierStats> tiers;
  std::map<std::string, uint64_t> check_failures;  // by kind (checksum, tokens, position, ...)
  std::optional<RemoteTierView> remote;
  uint64_t audits = 0;             // restored requests recomputed cold
  uint64_t audit_mismatches = 0;   // ... that differed (a broken promise)
  uint64_t audits_dropped = 0;     // sampled, but the audit queue was full or a request interrupted it
};

// A pin request (POST /v1/bank/pins): a prompt's tokens in a namespace, or
// a stored chain by the key of its last block.
struct PinSpec {
  bool by_chain = false;
  std::string chain;            // 64 hex digits (by_chain)
  std::vector<int32_t> tokens;  // the prompt (otherwise)
  std::string name_space;       // the prompt's namespace
  int64_t ttl_s = 0;
};

// A flush request (POST /v1/bank/flush): everything, one namespace, or the
// chains under one root key.
struct FlushSpec {
  enum class Scope { kAll, kNamespace, kRoot } scope = Scope::kAll;
  std::string name_space;  // kNamespace
  std::string root;        // kRoot: 64 hex digits
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string model_id() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Whether the checkpoint has an MTP head (speculative mode mtp may be asked for).
  virtual bool has_mtp() const { return false; }
  // The model's context length in tokens (0: unknown): the prompt limit.
  virtual int64_t context_length() const = 0;
  // Ids that end generation (end of text / end of turn).
  virtual std::vector<int32_t> stop_token_ids() const = 0;

  virtual Status encode(const std::string& text, std::vector<int32_t>* ids) const = 0;
  // The raw bytes of one token (may be part of a UTF-8 character).
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual std::unique_ptr<TextStream> new_text_stream() const = 0;

  virtual Status render_chat(const ChatParams& params, ChatPrompt* out) const = 0;
  virtual std::unique_ptr<ChatOutput> new_chat_output(const ChatParams& params, const ChatPrompt& prompt) const = 0;
  // The token bytes that constrained decoding masks over; null when this
  // backend cannot constrain (requests that need it are refused).
  virtual std::shared_ptr<const constrain::Vocabulary> vocabulary() const = 0;

  // Runs one request through the engine (Engine::complete's contract).
  virtual Status complete(const CompletionRequest& request, CompletionResult* result) = 0;
  // The response to a completed request is finished (built, or its stream's
  // last event written): the audit's hook (server/audit.h). Not called for
  // failed or client-cancelled requests; called when a stop string ended
  // generation. Must return at once.
  virtual void response_finished(const CompletionRequest& request, const CompletionResult& result) {}

  virtual BankStatsView bank_stats() const = 0;
  virtual nlohmann::json bank_stats_json() const = 0;
  // Shutdown: waits until the bank's write queue is on disk, at most
  // `deadline`, then drops what is left and stops the bank's writers
  // (TieredBank::close). Lookups keep working.
  virtual Status close_bank(std::chrono::milliseconds deadline) = 0;

  // --- The operator's view of the bank (/v1/bank/..., docs/interface.md).
  // A backend without a bank answers kUnsupported (the route says 501).

  // Stored prefixes, sorted by `sort` (tokens, bytes, hits, last_use), at
  // most `limit`, with their first tokens decoded when `text`.
  virtual Status bank_prefixes(const std::string& sort, size_t limit, bool text, nlohmann::json* out) const {
    return no_bank();
  }
  virtual Status bank_pins(nlohmann::json* out) const { return no_bank(); }
  virtual Status bank_pin(const PinSpec& spec, nlohmann::json* out) { return no_bank(); }
  // kNotFound when no pin has that id.
  virtual Status bank_unpin(const std::string& id) { return no_bank(); }
  virtual Status bank_flush(const FlushSpec& spec, nlohmann::json* out) { return no_bank(); }

 protected:
  static Status no_bank() { return Status::unsupported("this server has no bank"); }
};

}  // namespace sb
