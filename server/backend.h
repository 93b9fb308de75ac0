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
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/engine.h"

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
};

// Bank statistics as /metrics prints them.
struct BankTierStats {
  TierKind tier = TierKind::kRam;                // its label: tier_kind_name(tier)
  std::map<std::string, uint64_t> bytes;         // by object kind ("block", "snapshot")
  std::map<std::string, uint64_t> objects;       // by object kind
  uint64_t evictions = 0;
  uint64_t quarantined = 0;  // objects taken out after a failed check
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
};

struct BankStatsView {
  std::vector<BankTierStats> tiers;
  std::map<std::string, uint64_t> check_failures;  // by kind (checksum, tokens, position, ...)
  uint64_t audits = 0;             // restored requests recomputed cold
  uint64_t audit_mismatches = 0;   // ... that differed (a broken promise)
  uint64_t audits_dropped = 0;     // sampled, but the audit queue was full or a request interrupted it
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string model_id() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Ids that end generation (end of text / end of turn).
  virtual std::vector<int32_t> stop_token_ids() const = 0;

  virtual Status encode(const std::string& text, std::vector<int32_t>* ids) const = 0;
  // The raw bytes of one token (may be part of a UTF-8 character).
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual std::unique_ptr<TextStream> new_text_stream() const = 0;

  virtual Status render_chat(const ChatParams& params, ChatPrompt* out) const = 0;
  virtual std::unique_ptr<ChatOutput> new_chat_output(const ChatParams& params) const = 0;

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
};

}  // namespace sb
