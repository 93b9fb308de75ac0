// ResponsesOutput: one request's reply in the shape of OpenAI's Responses
// API, built from what the chat output parser makes of the generated text
// (the items and the event sequence in full: docs/interface.md,
// `POST /v1/responses`).
// Contract:
//  - output items in the order the text makes them: `reasoning` (also its
//    summary when asked), one `message`, one `function_call` per tool call;
//  - the stream is the Responses event sequence with a growing
//    sequence_number, ending with response.completed (or .incomplete) that
//    carries the whole response, its usage and the restore record;
//  - `incomplete` only when the request's own max_output_tokens ended it.
// Thread safety: one request's object, used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "server/backend/backend.h"
#include "server/transport/sse.h"

namespace sb {

struct ResponsesSetup {
  std::string id;  // the request id: items are named after it
  std::string model;
  int64_t created_at = 0;
  bool stream = false;
  bool reasoning_summary = false;  // reasoning.summary was asked
  bool output_logprobs = false;    // include: message.output_text.logprobs
  bool client_limit = false;       // max_output_tokens was sent
  // The request's settings as the response object echoes them:
  // instructions, tools, tool_choice, text, reasoning, temperature, top_p,
  // parallel_tool_calls, max_output_tokens, metadata.
  ResponseJson echo = ResponseJson::object();
  // A namespace's functions by their flat name: a call to one is an item
  // with `name` and `namespace`, as OpenAI's API returns it.
  std::map<std::string, std::pair<std::string, std::string>> namespaced;
  std::vector<std::string> warnings;  // the response's `warnings` (tools left out)
};

// How the engine's run ended.
struct ResponsesEnd {
  int64_t input_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t output_tokens = 0;
  bool length = false;  // max tokens ended it
  uint64_t seed = 0;
  ResponseJson restore;  // restore_json()
  int64_t capped_at = 0;  // the server's limit cut the reply (GenerationEnd::capped_at)
};

class ResponsesOutput {
 public:
  explicit ResponsesOutput(ResponsesSetup setup);

  // Streaming: response.created and response.in_progress.
  void start(std::vector<std::string>* events);
  // The chat output parser's share of one or more tokens, with the log-
  // probabilities of those tokens (chat logprob entries; empty when not
  // asked). Appends events when streaming.
  void push(const ChatDelta& delta, const ResponseJson& logprobs, std::vector<std::string>* events);
  // Streaming: closes the open item and sends response.completed.
  void finish(const ResponsesEnd& end, std::vector<std::string>* events);
  // Not streaming: the response object.
  ResponseJson response(const ResponsesEnd& end) const;

  bool has_tool_calls() const { return calls_ > 0; }
  int64_t reasoning_tokens() const { return reasoning_tokens_; }

 private:
  enum class Open { kNone, kReasoning, kMessage };
  ResponseJson object(const char* status, const ResponsesEnd* end) const;
  ResponseJson usage(const ResponsesEnd& end) const;
  ResponseJson reasoning_item(const char* status) const;
  ResponseJson message_item(const char* status) const;
  void emit(std::vector<std::string>* events, const std::string& type, ResponseJson body);
  void open(Open kind, std::vector<std::string>* events);
  void close(std::vector<std::string>* events);
  void add_call(const GeneratedToolCall& call, std::vector<std::string>* events);

  ResponsesSetup setup_;
  int64_t sequence_ = 0;
  Open open_ = Open::kNone;
  ResponseJson items_ = ResponseJson::array();          // finished output items
  std::string reasoning_, text_;                        // of the open (or last) item
  ResponseJson logprobs_ = ResponseJson::array();       // of the open message
  ResponseJson held_logprobs_ = ResponseJson::array();  // of tokens whose text is held back
  int calls_ = 0;
  int64_t reasoning_tokens_ = 0;
};

}  // namespace sb
