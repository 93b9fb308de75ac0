// AnthropicRenderer: Anthropic's Messages output (POST /v1/messages): the
// whole `message` body, or the stream of named events: message_start, ping,
// content_block_start / content_block_delta (text_delta, thinking_delta,
// input_json_delta) / content_block_stop per block, message_delta (stop_reason,
// stop_sequence, usage) and message_stop. Both carry statebank's `restore`
// and `seed` beside Anthropic's fields (the message, and message_delta).
//
// Usage: input_tokens counts the prompt tokens neither restored nor stored,
// cache_read_input_tokens the ones restored from the bank (restore_point),
// cache_creation_input_tokens the ones this request stored (stored_tokens);
// the three add up to the prompt.
//
// messages_protocol(): the route as a Protocol (server/protocols/renderer.h), with
// errors in Anthropic's shape ({"type": "error", "error": {type, message}}).
// Thread safety: as Renderer.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/protocols/generation.h"
#include "server/protocols/renderer.h"

namespace sb {

class AnthropicRenderer : public Renderer {
 public:
  AnthropicRenderer(const GenerationSetup& setup, std::vector<std::string> warnings)
      : setup_(setup), warnings_(std::move(warnings)) {}

  void open(std::vector<std::string>* events) override;
  void step(const GeneratedStep& s, std::vector<std::string>* events) override;
  void close(const GeneratedStep& last, const GenerationEnd& end, std::vector<std::string>* events) override;
  ResponseJson body(const GenerationEnd& end) override;

 private:
  enum class Block { kNone, kText, kThinking };
  void enter(Block b, std::vector<std::string>* events);  // closes the open block, opens b
  void end_block(std::vector<std::string>* events);

  const GenerationSetup setup_;
  const std::vector<std::string> warnings_;  // the message's `warnings` (server tools left out)
  Block open_ = Block::kNone;
  int index_ = -1;  // the current (or last) content block's index
};

// The usage object of a message (see above).
ResponseJson anthropic_usage(const GenerationEnd& end);

// The route POST /v1/messages.
const Protocol& messages_protocol();

// Anthropic's error body, and the error event that ends a stream.
std::string anthropic_error_body(const ApiError& e);
std::string anthropic_event(const std::string& name, const ResponseJson& data);

}  // namespace sb
