// Chat rendering against the checkpoint's real Jinja template, rendered by an
// independent engine: Python's jinja2 configured as Hugging Face transformers
// configures it (tools/tokenizer/render_chat.py). The checkpoint is the Qwen3
// one of SB_TOKENIZER_DIR; the cases (tests/tokenizer/data/chat_cases.json)
// cover every message shape: system, user, assistant, reasoning before and
// after the last query, embedded <think>, tools preamble, tool calls with and
// without content, merged tool responses, thinking on/off, generation prompt.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/tokenizer/chat_util.h"
#include "tests/tokenizer/test_util.h"
#include "tokenizer/chat_template.h"

namespace sb {
namespace {

TEST(ChatReference, Qwen3TemplateRenderedByJinja2MatchesEveryCase) {
  std::string cases_path = test::source_dir() + "/tests/tokenizer/data/chat_cases.json";
  std::vector<test::ChatCase> cases = test::parse_chat_cases(test::read_text(cases_path));
  ASSERT_GE(cases.size(), 15u);
  int status = 0;
  std::string out = test::run_command("python3 " + test::source_dir() + "/tools/tokenizer/render_chat.py '" +
                                          test::tokenizer_dir() + "' < " + cases_path,
                                      &status);
  ASSERT_EQ(status, 0) << "python3 with jinja2 is needed (tools/install-deps.sh)";
  std::vector<std::string> ref = test::split_lines(out);
  ASSERT_EQ(ref.size(), cases.size());

  ChatTemplate tmpl;
  ASSERT_TRUE(ChatTemplate::load(test::tokenizer_dir(), &tmpl).is_ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    const test::ChatCase& c = cases[i];
    nlohmann::json r = nlohmann::json::parse(ref[i]);
    ASSERT_TRUE(r.contains("text")) << c.name << ": the real template refused it: " << r.dump();
    RenderedChat got;
    Status st = tmpl.render(c.messages, c.tools, c.add_generation_prompt,
                            c.enable_thinking.value_or(tmpl.thinking_default()), &got);
    ASSERT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
    EXPECT_EQ(got.text, r["text"].get<std::string>()) << c.name;
  }
}

}  // namespace
}  // namespace sb
