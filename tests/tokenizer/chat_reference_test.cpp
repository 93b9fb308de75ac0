// Chat rendering against Python's jinja2 on the real templates of the Qwen
// checkpoints (tests/tokenizer/data/templates: Qwen3, Qwen3-Next Instruct
// and Thinking, Qwen3.5, Qwen3-Coder) and a customised one, configured as
// Hugging Face transformers configures it (tools/tokenizer/render_chat.py).
// The cases (tests/tokenizer/data/chat_cases.json) cover every message
// shape: system, user, assistant, reasoning before and after the last query,
// embedded <think>, tools preamble, tool calls with and without content,
// merged tool responses, thinking on/off, generation prompt. Where jinja2
// renders, the text must be equal byte for byte; where the template refuses
// (raise_exception), statebank must refuse with the same message.
#include <gtest/gtest.h>

#include "tests/tokenizer/chat_util.h"

namespace sb {
namespace {

TEST(ChatReference, EveryTemplateAndCaseMatchesJinja2) {
  std::vector<test::ChatCase> cases =
      test::parse_chat_cases(test::read_text(test::source_dir() + "/tests/tokenizer/data/chat_cases.json"));
  ASSERT_GE(cases.size(), 15u);
  std::vector<std::string> files = test::real_templates();
  files.push_back("custom.jinja");
  for (const std::string& file : files) {
    ChatTemplate tmpl = test::load_template(file);
    std::vector<nlohmann::json> ref = test::jinja2_render(file, cases);
    ASSERT_EQ(ref.size(), cases.size());
    int rendered = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      RenderedChat got;
      Status st = test::render_case(tmpl, cases[i], &got);
      if (ref[i].contains("text")) {
        ++rendered;
        ASSERT_TRUE(st.is_ok()) << file << " / " << cases[i].name << ": " << st.to_string();
        EXPECT_EQ(got.text, ref[i]["text"].get<std::string>()) << file << " / " << cases[i].name;
      } else {
        EXPECT_FALSE(st.is_ok()) << file << " / " << cases[i].name << ": jinja2 refused (" << ref[i]["error"] << ")";
        EXPECT_NE(st.message().find(ref[i]["error"].get<std::string>()), std::string::npos)
            << file << " / " << cases[i].name << ": " << st.message() << " vs " << ref[i]["error"];
      }
    }
    EXPECT_GE(rendered, 15) << file;
  }
}

TEST(ChatReference, TheCheckpointTemplateIsQwen3) {
  // The tokenizer package's own tokenizer_config.json carries the Qwen3 text.
  ChatTemplate from_dir;
  ASSERT_TRUE(ChatTemplate::load(test::tokenizer_dir(), &from_dir).is_ok());
  EXPECT_EQ(from_dir.source(), test::read_text(test::template_path("qwen3.jinja")));
}

}  // namespace
}  // namespace sb
