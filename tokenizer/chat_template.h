// ChatTemplate: renders OpenAI-style chat messages into the prompt text of a
// Qwen checkpoint, byte for byte what the checkpoint's own Jinja template
// gives under Hugging Face transformers, without a Jinja engine.
//
// Two families are implemented, and load() reads which one (and its thinking
// variant) from the checkpoint's template (tokenizer_config.json
// "chat_template", or chat_template.jinja):
//   kQwen3Json  Qwen3 / Qwen3-Next: tool calls as JSON inside <tool_call>,
//               the "# Tools ... <tools></tools>" preamble in the system turn,
//               untrimmed contents.
//   kQwen35Xml  Qwen3.5: tool calls as <function=NAME><parameter=ARG> XML,
//               contents trimmed, a system message only at the start, at
//               least one real user query required.
// Shared shapes: ChatML turns "<|im_start|>{role}\n{content}<|im_end|>\n";
// tool results become one user turn per run of consecutive tool messages,
// each result wrapped "\n<tool_response>\n...\n</tool_response>"; assistant
// turns after the last real user query (a user message that is not itself a
// wrapped tool response) carry their reasoning in "<think>\n...\n</think>\n\n",
// earlier ones drop it.
//
// Thinking variants (ThinkingPrompt) differ only in the generation prompt;
// thinking_default() is what a request that does not say means.
//
// Roles other than system/user/assistant/tool, and what the real template
// refuses (Qwen3.5: a late system message, no user query), are errors.
//
// Thread-safety: immutable after load(); render() is const and reentrant.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sb {

enum class ChatFlavour { kQwen3Json, kQwen35Xml };

enum class ThinkingPrompt {
  kNone,               // "<|im_start|>assistant\n" only (Instruct models)
  kEmptyWhenDisabled,  // Qwen3 hybrid: nothing by default, "<think>\n\n</think>\n\n" when disabled
  kOpenByDefault,      // "<think>\n" by default, "<think>\n\n</think>\n\n" when disabled
  kOpenWhenEnabled,    // "<think>\n" when enabled, "<think>\n\n</think>\n\n" otherwise (default off)
  kAlwaysOpen,         // "<think>\n" whatever the request says (Thinking models)
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of the arguments object, as in OpenAI's API
};

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
  // Set when the request carries reasoning_content (even empty); when unset an
  // assistant content of the form "<think>R</think>C" is split into R and C.
  std::optional<std::string> reasoning_content;
  std::vector<ToolCall> tool_calls;
  std::string tool_call_id;
};

struct RenderedChat {
  static constexpr size_t npos = static_cast<size_t>(-1);
  std::string text;
  // Byte offset in `text` where the final role=user message's
  // "<|im_start|>user" starts, or npos when there is none. The offset is at an
  // added token, so encode(text) == encode(text[:o]) + encode(text[o:]) and
  // the engine can find the token index of that boundary by encoding the
  // prefix alone.
  size_t final_user_offset = npos;
};

class ChatTemplate {
 public:
  ChatTemplate() = default;

  // Reads <model_dir>/chat_template.jinja if present, else the chat_template
  // of <model_dir>/tokenizer_config.json (a string, or a list of named
  // templates of which "default" is used).
  static Status load(const std::string& model_dir, ChatTemplate* out);
  // Identifies the family and variant from template source text.
  static Status from_source(std::string_view jinja, ChatTemplate* out);

  ChatFlavour flavour() const { return flavour_; }
  ThinkingPrompt thinking_prompt() const { return thinking_; }
  bool thinking_default() const;
  // Whether the generation prompt leaves a "<think>" open, so that the model's
  // first output is reasoning (OutputParser's thinking_opened_in_prompt).
  bool prompt_opens_thinking(bool enable_thinking) const;

  // tools: an OpenAI tools array or null (an empty array counts as none).
  // A nlohmann::json may be passed too, but only ordered_json keeps the key
  // order that the real template's tojson reproduces.
  Status render(const std::vector<ChatMessage>& messages, const nlohmann::ordered_json& tools,
                bool add_generation_prompt, bool enable_thinking, RenderedChat* out) const;

 private:
  Status render_json(const std::vector<ChatMessage>& m, const nlohmann::ordered_json& tools, RenderedChat* out) const;
  Status render_xml(const std::vector<ChatMessage>& m, const nlohmann::ordered_json& tools, RenderedChat* out) const;

  ChatFlavour flavour_ = ChatFlavour::kQwen3Json;
  ThinkingPrompt thinking_ = ThinkingPrompt::kEmptyWhenDisabled;
  bool renders_reasoning_ = true;  // false for templates that never show <think> blocks
  std::string tools_head_, tools_tail_;  // the tools preamble around the one-per-line schemas
};

}  // namespace sb
