// ChatTemplate: renders OpenAI-style chat messages into a checkpoint's prompt
// text by running its own Jinja chat template (jinja/) with the variables and
// environment of transformers' apply_chat_template, so the text is byte for
// byte transformers' (docs/text.md, "Chat templates").
// Contract:
//  - tool-call arguments that are a JSON object text reach the template as
//    the object, others as the string;
//  - load() refuses a template the interpreter cannot run or that fails on a
//    one-message conversation, naming the file, the construct and its
//    position: a server starts with a template it can run or not at all.
// Thread-safety: immutable after load(); render() is const and reentrant.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "jinja/template.h"

namespace sb {

// The tool-call syntax the template teaches the model (read from its source):
//   kQwen3Json  <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>
//   kQwen35Xml  <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n...
//               </function>\n</tool_call>
enum class ChatFlavour { kQwen3Json, kQwen35Xml };

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of the arguments object, as in OpenAI's API
};

// A convenience form of one message (tests, tools); render() takes the
// OpenAI JSON form directly.
struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
  std::optional<std::string> reasoning_content;
  std::vector<ToolCall> tool_calls;
  std::string tool_call_id;
};

struct ChatOptions {
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // passed to the template only when set
  // Other template variables (a request's chat_template_kwargs); an object.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  // The messages went through ChatTemplate::parse_tool_arguments() already
  // (a server does it once a request, however often it renders).
  bool tool_arguments_parsed = false;
};

struct RenderedChat {
  static constexpr size_t npos = static_cast<size_t>(-1);
  std::string text;
  // Byte offset in `text` where the turn of the final role=user message
  // starts (its "<|im_start|>"), or npos when there is none or it cannot be
  // told apart. The offset is at an added token, so encode(text) ==
  // encode(text[:o]) + encode(text[o:]) and the engine finds the token index
  // of that boundary by encoding the prefix alone.
  size_t final_user_offset = npos;
  // The generation prompt leaves a "<think>" open: the model's first output
  // is reasoning (OutputParser's thinking_opened_in_prompt).
  bool opens_thinking = false;
};

class ChatTemplate {
 public:
  ChatTemplate() = default;

  // Reads <model_dir>/chat_template.jinja if present, else the chat_template
  // of <model_dir>/tokenizer_config.json (a string, or a list of named
  // templates of which "default" is used). kNotFound when there is none.
  static Status load(const std::string& model_dir, ChatTemplate* out);
  static Status from_source(std::string_view jinja, ChatTemplate* out);
  // From tokenizer_config.json text (its chat_template and special tokens);
  // `source` names it in errors.
  static Status from_config_json(const std::string& text, const std::string& source, ChatTemplate* out);

  ChatFlavour flavour() const { return flavour_; }
  const std::string& source() const { return source_; }

  // messages: an array of OpenAI messages (role, content, reasoning_content,
  // tool_calls, tool_call_id, name); tools: an OpenAI tools array or null (an
  // empty array counts as none). Key order is kept: tojson prints it.
  // A template's refusal (raise_exception) or error is kInvalidArgument.
  Status render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                const ChatOptions& options, RenderedChat* out) const;
  Status render(const std::vector<ChatMessage>& messages, const nlohmann::ordered_json& tools,
                const ChatOptions& options, RenderedChat* out) const;

  // The normalisation above, in place: each tool call's arguments that are
  // the text of a JSON object (within the bounds of a request body,
  // common/json_shape.h) become the object; other texts stay. render() does
  // it to a copy unless options.tool_arguments_parsed.
  static void parse_tool_arguments(nlohmann::ordered_json* messages);

  // The OpenAI JSON form of ChatMessage values.
  static nlohmann::ordered_json to_json(const std::vector<ChatMessage>& messages);

 private:
  static Status build(std::string_view src, nlohmann::ordered_json specials, ChatTemplate* out);
  Status render_text(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     const ChatOptions& options, std::string* out) const;

  jinja::Template template_;
  std::string source_;
  ChatFlavour flavour_ = ChatFlavour::kQwen3Json;
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();  // bos_token, eos_token...
};

}  // namespace sb
