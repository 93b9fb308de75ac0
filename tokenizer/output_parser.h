// OutputParser: turns generated text of a Qwen model into OpenAI message
// fields, incrementally: <think>...</think> becomes reasoning_content,
// <tool_call>...</tool_call> blocks tool_calls (a JSON body for kQwen3Json,
// <function=NAME><parameter=K>V</parameter> for kQwen35Xml), the rest content.
// Contract:
//  - push() takes pieces split anywhere and returns what is certain; the
//    deltas concatenated equal one push() of the whole text plus finish(),
//    and result();
//  - a tool call is emitted whole when its closing tag arrives (or at
//    finish() if its body parses); one whose body does not parse stays as
//    content, never lost;
//  - whitespace is normalised so that re-rendering the message with the chat
//    template gives the model's own text (docs/text.md, "Output parsing").
// Not thread-safe: one parser per generated message.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

namespace sb {

struct ToolCallDelta {
  int index = 0;           // position among this message's tool calls
  std::string id;          // "call_<index>"; a server may substitute its own
  std::string name;
  std::string arguments;   // JSON text of the arguments object
};

struct ParsedDelta {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
};

class OutputParser {
 public:
  // thinking_opened_in_prompt: the prompt ended inside "<think>\n"
  // (ChatTemplate::prompt_opens_thinking), so output starts as reasoning.
  OutputParser(ChatFlavour flavour, bool thinking_opened_in_prompt);

  // The request's OpenAI tools array: lets XML parameter values be typed by
  // the function's JSON schema ("5" stays a string for a string parameter).
  // Without it a value that parses as JSON is taken as JSON, else as string.
  void set_tools(const nlohmann::ordered_json& tools) { tools_ = tools; }

  ParsedDelta push(std::string_view text);
  ParsedDelta finish();

  // Everything parsed so far (all deltas merged).
  const ParsedDelta& result() const { return total_; }

 private:
  enum class State { kStart, kReasoning, kContent, kToolCall };
  void process(bool final, ParsedDelta* out);
  void emit_reasoning(std::string_view s, ParsedDelta* out);
  void emit_content(std::string_view s, ParsedDelta* out);
  bool parse_call(std::string_view body, ToolCallDelta* call) const;
  bool parse_json_call(std::string_view body, ToolCallDelta* call) const;
  bool parse_xml_call(std::string_view body, ToolCallDelta* call) const;
  void record(const ParsedDelta& d);

  ChatFlavour flavour_;
  State state_;
  nlohmann::ordered_json tools_;
  std::string buf_;           // text not yet classified
  std::string held_newlines_; // trailing newlines of reasoning, not yet known to be inner
  std::string held_space_;    // trailing whitespace of content, not yet known to be inner
  bool reasoning_begun_ = false;
  bool after_think_ = false;  // content has just followed </think>: skip its leading newlines
  int calls_ = 0;
  ParsedDelta total_;
};

}  // namespace sb
