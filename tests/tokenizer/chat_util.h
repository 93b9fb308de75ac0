// Reads the chat cases of tests/tokenizer/data/chat_cases.json (OpenAI-shaped
// messages) into ChatMessage lists for the chat template tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace sb::test {

struct ChatCase {
  std::string name;
  std::vector<ChatMessage> messages;
  nlohmann::ordered_json tools;  // null when absent
  bool add_generation_prompt = false;
  std::optional<bool> enable_thinking;
};

inline std::vector<ChatCase> parse_chat_cases(const std::string& text) {
  std::vector<ChatCase> out;
  for (const auto& c : nlohmann::ordered_json::parse(text)) {
    ChatCase cc;
    cc.name = c["name"].get<std::string>();
    for (const auto& m : c["messages"]) {
      ChatMessage msg;
      msg.role = m["role"].get<std::string>();
      if (m.contains("content") && m["content"].is_string()) msg.content = m["content"].get<std::string>();
      if (m.contains("reasoning_content") && m["reasoning_content"].is_string())
        msg.reasoning_content = m["reasoning_content"].get<std::string>();
      if (m.contains("tool_call_id")) msg.tool_call_id = m["tool_call_id"].get<std::string>();
      if (m.contains("tool_calls"))
        for (const auto& t : m["tool_calls"])
          msg.tool_calls.push_back({t.value("id", ""), t["function"]["name"].get<std::string>(),
                                    t["function"]["arguments"].get<std::string>()});
      cc.messages.push_back(std::move(msg));
    }
    if (c.contains("tools")) cc.tools = c["tools"];
    cc.add_generation_prompt = c.value("add_generation_prompt", false);
    if (c.contains("enable_thinking")) cc.enable_thinking = c["enable_thinking"].get<bool>();
    out.push_back(std::move(cc));
  }
  return out;
}

}  // namespace sb::test
