// Backend: what the HTTP layer's serving needs from a model, its tokenizer
// and the engine (tokenize, render a chat, constrain, submit a completion),
// behind one interface, so routes, admission and limits are tested without
// a model (tests/server) and the real one is a thin adapter
// (server/backend/engine_backend.h). The bank's administration is the other view of
// the same object: server/backend/bank_admin.h.
//
// Thread safety: every method may be called from many threads at once.
// TextStream and ChatOutput objects belong to one request (one thread at a
// time).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "constrain/constraint.h"
#include "engine/admission.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace sb {

// What a chat template renders: the part of a chat request (ChatParams,
// server/protocols/request_parse.h) that reaches the model.
struct ChatConversation {
  // Normalised messages: role, content (string), and where given
  // reasoning_content, tool_calls (id, type, function{name, arguments: a JSON
  // text, or from Messages' tool_use the object itself, parsed once}),
  // tool_call_id, name. Content arrays of text parts are joined.
  // In the request's key order: templates print schemas as the client sent them.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // [{type:function, function:{name, description, parameters}}]
  std::string tool_choice = "auto";                // none, auto, required, or a function name
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking
  // Other chat_template_kwargs, passed to the template as variables.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // messages' tool-call arguments are parsed (ChatTemplate::parse_tool_arguments):
  // done once a request, before its first render.
  bool tool_arguments_parsed = false;
};

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
  int64_t message_boundary = -1;                  // first token of the final user message, or -1
  bool opens_thinking = false;                    // the prompt leaves a <think> open: output starts as reasoning
  ChatFlavour flavour = ChatFlavour::kQwen3Json;  // the template's tool-call syntax
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

  virtual Status render_chat(const ChatConversation& chat, ChatPrompt* out) const = 0;
  virtual std::unique_ptr<ChatOutput> new_chat_output(const ChatConversation& chat, const ChatPrompt& prompt) const = 0;
  // The token bytes that constrained decoding masks over; null when this
  // backend cannot constrain (requests that need it are refused).
  virtual std::shared_ptr<const constrain::Vocabulary> vocabulary() const = 0;

  // The engine's rules for a request (Engine::check), asked before it is
  // admitted, so that an invalid request is refused with its reason and
  // never takes a place in the queue.
  virtual Status check(const CompletionRequest& request) const = 0;
  // Admits one request into the engine's queue (Engine::submit's contract,
  // engine/admission.h): returns at once; on_done runs exactly once, on an
  // engine thread, when it is admitted. `tenant`: what the tenant share
  // limits (empty: not limited).
  virtual Admit submit(CompletionRequest request, CompletionDone on_done, const std::string& tenant) = 0;
  // That queue, the server's one gate: its count of running and waiting
  // requests (/metrics, the audit), close() and drain() at shutdown (closed
  // is draining).
  virtual Admission& admission() = 0;
  // The response to a completed request is finished (built, or its stream's
  // last event written): the audit's hook (server/backend/audit.h). Not called for
  // failed or client-cancelled requests; called when a stop string ended
  // generation. Must return at once.
  virtual void response_finished(const CompletionRequest& request, const CompletionResult& result) {}
};

}  // namespace sb
