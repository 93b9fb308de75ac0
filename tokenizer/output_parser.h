// OutputParser: turns generated text of a Qwen model into OpenAI message
// fields, incrementally: reasoning between <think> and </think> becomes
// reasoning_content, <tool_call>...</tool_call> blocks become tool_calls (JSON
// body for kQwen3Json, <function=NAME><parameter=K>V</parameter> for
// kQwen35Xml), the rest is content.
//
// Streaming contract: push() takes text pieces of any size (split anywhere,
// even inside a tag) and returns what is certain so far; text that could
// still turn into a tag is held back until the next piece decides. The
// concatenation of all deltas' content (and reasoning_content) equals what a
// single push() of the whole text followed by finish() gives, and equals
// result(). A tool call is emitted whole, as one delta, when its closing tag
// arrives (or at finish() if the closing tag never came but the body parses).
//
// Normalisation, chosen so that re-rendering the parsed message with the
// chat template reproduces the model's own text: reasoning loses leading and
// trailing newlines (the template writes "<think>\n" + r + "\n</think>");
// content loses the newlines right after </think> and the whitespace right
// before a <tool_call>; whitespace-only content after the last tool call is
// dropped. A <think> opens reasoning only at the very start of the output
// (after optional whitespace); elsewhere it is content. A tool call whose
// body does not parse is kept verbatim as content, never lost.
//
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
