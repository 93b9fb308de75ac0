// OpenAiRenderer: OpenAI's /v1/chat/completions and /v1/completions output:
// `chat.completion.chunk` / `text_completion` chunks as `data:` events ending
// in `data: [DONE]`, and the whole `chat.completion` / `text_completion`
// body; both carry statebank's `seed` and `restore` (docs/interface.md).
// openai_protocol(): the two routes as Protocols (server/protocols/renderer.h).
//
// Thread safety: as Renderer.
#pragma once

#include <memory>

#include "server/backend/backend.h"
#include "server/protocols/generation.h"
#include "server/protocols/renderer.h"

namespace sb {

class OpenAiRenderer : public Renderer {
 public:
  // REQUIRES: `backend` outlives the renderer.
  OpenAiRenderer(const Backend& backend, const GenerationSetup& setup) : backend_(backend), setup_(setup) {}

  void open(std::vector<std::string>* events) override;
  void step(const GeneratedStep& s, std::vector<std::string>* events) override;
  void close(const GeneratedStep& last, const GenerationEnd& end, std::vector<std::string>* events) override;
  ResponseJson body(const GenerationEnd& end) override;

 private:
  ResponseJson chunk(ResponseJson choice) const;
  ResponseJson chat_delta(const ChatDelta& d);
  ResponseJson completion_logprobs(const std::vector<GeneratedEntry>& entries,
                                   const std::vector<GeneratedEntry>& prompt) const;
  ResponseJson chat_logprobs(const std::vector<GeneratedEntry>& entries) const;
  std::string finish_reason(const GenerationEnd& end) const;
  ResponseJson usage(const GenerationEnd& end) const;

  const Backend& backend_;
  const GenerationSetup setup_;
  size_t streamed_calls_ = 0;  // tool calls already in chunks: the next one's index
};

// The chat (`chat` true) or completions route.
const Protocol& openai_protocol(bool chat);

// OpenAI's error shape: {"error": {message, type, param, code}} (server/protocols/errors.h).
std::string openai_error_body(const ApiError& e);

}  // namespace sb
