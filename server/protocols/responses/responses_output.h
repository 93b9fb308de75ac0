// ResponsesOutput: one request's reply in the shape of OpenAI's Responses
// API, built from what the chat output parser makes of the generated text.
//
// Output items, in the order the text makes them: a `reasoning` item (the
// thinking, as reasoning_text content; also as its summary when the request
// asked for one), a `message` item with one `output_text` part, and one
// `function_call` item per tool call. The stream is the Responses event
// sequence, each event `event: TYPE` + `data: JSON` with a growing
// `sequence_number`:
//   response.created, response.in_progress,
//   per item: response.output_item.added, then
//     reasoning: response.reasoning_text.delta..., response.reasoning_text.done
//                (with a summary asked, also response.reasoning_summary_part.added,
//                response.reasoning_summary_text.delta / .done and
//                response.reasoning_summary_part.done: the reasoning is its summary)
//     message:   response.content_part.added, response.output_text.delta...,
//                response.output_text.done, response.content_part.done
//     call:      response.function_call_arguments.delta (the whole arguments:
//                a call is parsed whole), response.function_call_arguments.done
//   response.output_item.done,
//   response.completed (or response.incomplete) with the whole response,
//   usage (input_tokens_details.cached_tokens) and the restore record.
//
// Status: `incomplete` (reason max_output_tokens) only when the request's
// own max_output_tokens ended the reply; a reply the server's limit ended is
// `completed` (docs/interface.md says why).
//
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
