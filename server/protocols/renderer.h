// Renderer: how one protocol (OpenAI completions or chat, Anthropic Messages,
// ...) shows a generation: the events of a stream and the body of a whole
// response. Generation (server/protocols/generation.h) does the work every protocol
// shares (text decoding, stop strings, splitting chat output into content,
// reasoning and tool calls, counting) and hands each renderer the results.
//
// A Protocol names a route's parts: how its body becomes an engine request
// (prepare, which also makes the renderer), and how its errors look, as a
// body and as a stream event.
//
// Thread safety: a Renderer belongs to one request's Generation and is
// called under its ordering (never concurrently). A Protocol is immutable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/backend/backend.h"
#include "server/protocols/errors.h"
#include "server/transport/sse.h"

namespace sb {

// One generated token the client sees, with where its text starts.
struct GeneratedEntry {
  int32_t token;
  float logprob;
  std::vector<TokenLogprob> top;
  int64_t text_offset;  // bytes of shown text before it (completions: echo included)
};

// What one step added: a token's text (after stop strings), and for chat the
// same text split into parts. At the end of a stream the last step carries
// the held-back rest and has no entry.
struct GeneratedStep {
  const GeneratedEntry* entry = nullptr;
  std::string text;
  ChatDelta chat;  // chat only
};

// Why the shown text ended.
enum class EndCause {
  kEndOfTurn,      // the model's end token, or the engine ended it otherwise
  kLength,         // the request's max_tokens
  kCapped,         // the server's limit (--max-tokens-cap, --max-tokens-limit), below the request's max_tokens
  kStopSequence,   // a stop string (GenerationEnd::stop_sequence)
  kToolCallLimit,  // parallel_tool_calls false: the first call ended it
};

// Everything a whole response or a stream's closing events may show. Its
// references are the Generation's: valid during the call that receives it.
struct GenerationEnd {
  const CompletionResult& result;
  EndCause cause;
  std::string stop_sequence;  // kStopSequence: the stop string that matched
  const std::string& text;    // all shown text (chat: before splitting)
  const std::string& content;
  const std::string& reasoning;
  const std::vector<GeneratedToolCall>& tool_calls;
  const std::vector<GeneratedEntry>& entries;
  int64_t prompt_tokens;
  int64_t completion_tokens;
  // kCapped: the server's limit that cut the reply, shown as `capped_at` on
  // every route (the end reason itself reads as a normal end); else 0.
  int64_t capped_at = 0;
};

class Renderer {
 public:
  virtual ~Renderer() = default;
  // Streaming: the events before the first token.
  virtual void open(std::vector<std::string>* events) = 0;
  // Streaming: one step (a token; its text may be empty while held back).
  virtual void step(const GeneratedStep& s, std::vector<std::string>* events) = 0;
  // Streaming: the last step (the held-back rest) and the closing events.
  virtual void close(const GeneratedStep& last, const GenerationEnd& end, std::vector<std::string>* events) = 0;
  // Not streaming: the response body.
  virtual ResponseJson body(const GenerationEnd& end) = 0;
};

struct GenerationSetup;
struct CompletionInput;
struct PreparedCompletion;
struct ParseLimits;

struct Protocol {
  std::string route;  // e.g. "/v1/chat/completions": activity records
  // The body as the engine's request, the output's setup and its renderer.
  // Throws ApiException naming the field at fault.
  std::function<PreparedCompletion(const Backend&, const ParseLimits&, const CompletionInput&)> prepare;
  // An error as this protocol's response body, and as the events that end a
  // stream with it.
  std::function<std::string(const ApiError&)> error_body;
  std::function<std::vector<std::string>(const ApiError&)> error_events;
};

}  // namespace sb
