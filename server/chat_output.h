// QwenChatOutput: splits a Qwen3-style chat model's generated text into
// reasoning (<think>...</think>), tool calls (<tool_call>{"name": ...,
// "arguments": {...}}</tool_call>) and content, as it streams.
//
// Text that may be the start of a tag is held back until decided. Newlines
// that only frame a block ("<think>\n", "\n</think>\n\n") are dropped. A
// <tool_call> body that is not a JSON object with a "name" stays content,
// tags included, so nothing the model wrote is lost. One request's object.
#pragma once

#include <string>

#include "server/backend.h"

namespace sb {

class QwenChatOutput : public ChatOutput {
 public:
  // thinking_open: the prompt already opened a <think> block.
  explicit QwenChatOutput(bool thinking_open, std::string call_id_prefix = "call_");
  ChatDelta push(const std::string& text) override;
  ChatDelta finish() override;

 private:
  enum class Where { kContent, kThink, kTool };
  void emit(Where where, const std::string& text, ChatDelta* d);

  Where where_;
  std::string buf_;
  std::string call_id_prefix_;
  int calls_ = 0;
  bool trim_leading_ = false;   // drop newlines at the start of the next run
  std::string held_newlines_;   // reasoning's trailing newlines, shown only if more follows
};

}  // namespace sb
