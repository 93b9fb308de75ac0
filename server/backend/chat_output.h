// ParserChatOutput: the server's ChatOutput over tokenizer/output_parser.h,
// which splits a Qwen model's generated text into reasoning (<think>),
// tool calls (<tool_call>, JSON or Qwen3.5 XML body) and content, as it
// streams. One request's object.
#pragma once

#include <nlohmann/json.hpp>

#include "server/backend/backend.h"
#include "tokenizer/output_parser.h"

namespace sb {

class ParserChatOutput : public ChatOutput {
 public:
  // thinking_open: the prompt already opened a <think> block.
  ParserChatOutput(ChatFlavour flavour, bool thinking_open, const nlohmann::ordered_json& tools);
  ChatDelta push(const std::string& text) override;
  ChatDelta finish() override;

 private:
  OutputParser parser_;
};

}  // namespace sb
