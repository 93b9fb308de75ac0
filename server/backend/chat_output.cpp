#include "server/backend/chat_output.h"

namespace sb {

namespace {

ChatDelta convert(ParsedDelta&& d) {
  ChatDelta out;
  out.content = std::move(d.content);
  out.reasoning = std::move(d.reasoning_content);
  for (auto& c : d.tool_calls)
    out.tool_calls.push_back(GeneratedToolCall{std::move(c.id), std::move(c.name), std::move(c.arguments)});
  return out;
}

}  // namespace

ParserChatOutput::ParserChatOutput(ChatFlavour flavour, bool thinking_open, const nlohmann::ordered_json& tools)
    : parser_(flavour, thinking_open) {
  if (tools.is_array() && !tools.empty()) parser_.set_tools(tools);
}

ChatDelta ParserChatOutput::push(const std::string& text) { return convert(parser_.push(text)); }

ChatDelta ParserChatOutput::finish() { return convert(parser_.finish()); }

}  // namespace sb
