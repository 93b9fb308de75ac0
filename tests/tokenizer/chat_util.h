// Shared by the chat template tests: the real templates of
// tests/tokenizer/data/templates, the chat cases of
// tests/tokenizer/data/chat_cases.json, and the jinja2 reference renderer
// (tools/tokenizer/render_chat.py) run over a list of cases.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/tokenizer/test_util.h"
#include "tokenizer/chat_template.h"

namespace sb::test {

struct ChatCase {
  std::string name;
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  // null when absent
  bool add_generation_prompt = false;
  std::optional<bool> enable_thinking;
};

// The real templates of the checkpoints, by file name (see the README there).
inline const std::vector<std::string>& real_templates() {
  static const std::vector<std::string> names = {"qwen3.jinja", "qwen3-next-instruct.jinja", "qwen3-next-thinking.jinja",
                                                 "qwen3.5.jinja", "qwen3-coder.jinja"};
  return names;
}
inline std::string template_path(const std::string& file) {
  return source_dir() + "/tests/tokenizer/data/templates/" + file;
}
inline ChatTemplate load_template(const std::string& file) {
  ChatTemplate t;
  Status st = ChatTemplate::from_source(read_text(template_path(file)), &t);
  EXPECT_TRUE(st.is_ok()) << file << ": " << st.to_string();
  return t;
}

inline std::vector<ChatCase> parse_chat_cases(const std::string& text) {
  std::vector<ChatCase> out;
  for (const auto& c : nlohmann::ordered_json::parse(text)) {
    ChatCase cc;
    cc.name = c.value("name", "");
    cc.messages = c["messages"];
    if (c.contains("tools")) cc.tools = c["tools"];
    cc.add_generation_prompt = c.value("add_generation_prompt", false);
    if (c.contains("enable_thinking") && c["enable_thinking"].is_boolean()) cc.enable_thinking = c["enable_thinking"].get<bool>();
    out.push_back(std::move(cc));
  }
  return out;
}

inline nlohmann::ordered_json to_json(const std::vector<ChatCase>& cases) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : cases) {
    nlohmann::ordered_json j = {{"name", c.name}, {"messages", c.messages}, {"add_generation_prompt", c.add_generation_prompt}};
    if (!c.tools.is_null()) j["tools"] = c.tools;
    if (c.enable_thinking) j["enable_thinking"] = *c.enable_thinking;
    out.push_back(std::move(j));
  }
  return out;
}

// What jinja2 makes of each case with `template_file`: {"text"} or {"error"}.
inline std::vector<nlohmann::json> jinja2_render(const std::string& template_file, const std::vector<ChatCase>& cases) {
  std::string in = temp_path("cases_" + template_file + ".json");
  write_text(in, to_json(cases).dump());
  int status = 0;
  std::string out = run_command("python3 " + source_dir() + "/tools/tokenizer/render_chat.py '" +
                                    template_path(template_file) + "' --arguments-as-objects < " + in,
                                &status);
  std::remove(in.c_str());
  EXPECT_EQ(status, 0) << "python3 with jinja2 is needed (tools/install-deps.sh)";
  std::vector<nlohmann::json> ref;
  for (const auto& line : split_lines(out)) ref.push_back(nlohmann::json::parse(line));
  EXPECT_EQ(ref.size(), cases.size());
  return ref;
}

inline Status render_case(const ChatTemplate& t, const ChatCase& c, RenderedChat* out) {
  ChatOptions o;
  o.add_generation_prompt = c.add_generation_prompt;
  o.enable_thinking = c.enable_thinking;
  return t.render(c.messages, c.tools, o, out);
}

}  // namespace sb::test
