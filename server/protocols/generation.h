// Generation: the part of turning one request's generated tokens into
// output that every protocol shares: tokens to text, stop strings, the chat
// output's split into content, reasoning and tool calls, the tool-call limit,
// and the counts. How it shows (OpenAI chunks, Anthropic events, a whole
// body) is its Renderer's (server/protocols/renderer.h).
//
// Thread safety: every call on the request's own thread (never the engine's:
// the step thread only queues tokens, engine/token_queue.h): start_stream()
// before the request is submitted, on_token() for each queued token,
// finish_stream() or response() once the queue is closed.
//
// Responses are ResponseJson (server/transport/sse.h): log-probabilities are stored as
// the engine's float32 values and print as the shortest decimal (at most 9
// significant digits) that reads back as the same float, so responses
// compare exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/backend/backend.h"
#include "server/protocols/renderer.h"
#include "server/protocols/stop_matcher.h"
#include "server/transport/sse.h"

namespace sb {

// A request's restore record as JSON (docs/interface.md). The client's view
// shows its own-namespace miss reason; the operator's view (/v1/bank/requests)
// shows operator_miss_reason() (bank/miss_reason.h).
ResponseJson restore_json(const RestoreRecord& r, bool operator_view = false);
// What speculation did for a request (docs/interface.md, "Speculative decoding").
ResponseJson speculative_json(const SpeculativeRecord& r);

struct GenerationSetup {
  bool chat = false;
  std::string id;
  std::string model;
  int64_t created = 0;
  bool stream = false;
  bool include_usage = false;
  int logprobs = -1;  // -1: none; else the number of alternatives per token
  bool echo = false;  // completions only
  std::string echo_text;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> stop_token_ids;  // ended generation; not shown as text
  std::vector<std::string> stop;
  uint64_t seed = 0;               // reported, so that a request can be replayed
  // The server's limit that lowered the request's max_tokens (0: none lowered
  // it): --max-tokens-cap or --max-tokens-limit. Shown as `capped_at`.
  int64_t max_tokens_capped = 0;
  int max_tool_calls = -1;         // parallel_tool_calls false: 1 (generation ends after the first call)
};

class Generation {
 public:
  Generation(const Backend& backend, GenerationSetup setup, std::unique_ptr<ChatOutput> chat_output,
             std::unique_ptr<Renderer> renderer);

  // Streaming: the opening events.
  void start_stream(std::vector<std::string>* events);
  // One generated token. Appends events to *events when streaming.
  // Returns false once a stop string has ended the text.
  bool on_token(const GeneratedToken& token, std::vector<std::string>* events);
  // Streaming: the closing events (last text, finish reason, usage, restore).
  void finish_stream(const CompletionResult& result, std::vector<std::string>* events);
  // Not streaming: the response body.
  ResponseJson response(const CompletionResult& result);

  // A stop string or the tool-call limit ended the text (a normal end, not a cancellation).
  bool stopped_early() const { return stops_.stopped() || call_limit_reached(); }
  // After a stop: drops the tokens the engine made after the one that
  // stopped the text (it learns of the stop a step or more later), so the
  // result is what an immediate stop gives.
  void trim(CompletionResult* result) const;

 private:
  void absorb(const ChatDelta& d);
  GeneratedStep drain();  // held text at the end, through the stop matcher and the chat output
  GenerationEnd end(const CompletionResult& result) const;
  bool call_limit_reached() const {
    return setup_.max_tool_calls >= 0 && static_cast<int>(tool_calls_.size()) >= setup_.max_tool_calls;
  }

  GenerationSetup setup_;
  std::unique_ptr<TextStream> text_stream_;
  std::unique_ptr<ChatOutput> chat_output_;
  std::unique_ptr<Renderer> renderer_;
  StopMatcher stops_;
  std::string text_;                     // emitted text (completions: after any echo)
  int64_t text_bytes_ = 0;               // offsets for text_offset, echo included
  std::vector<GeneratedEntry> entries_;  // generated tokens shown to the user
  size_t used_ = 0;                      // tokens on_token() took, up to the stop
  // Chat: accumulated parts.
  std::string content_, reasoning_;
  std::vector<GeneratedToolCall> tool_calls_;
};

}  // namespace sb
