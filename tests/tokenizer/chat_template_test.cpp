// Chat rendering through the checkpoints' real templates (run by jinja/),
// against fixed expected strings: system, user, assistant, reasoning (kept
// after the last user query, dropped before), embedded <think>, tools
// preamble, tool calls (JSON and XML forms), merged tool responses, thinking
// on/off, generation prompt; plus loading (sources, errors at start-up), the
// flavour, the thinking-open flag, template variables, and the
// final-user-offset boundary property on every template.
// (chat_reference_test and chat_fuzz_test compare against jinja2 itself.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/tokenizer/chat_util.h"
#include "tokenizer/tokenizer.h"

namespace sb {
namespace {

using ojson = nlohmann::ordered_json;

const char kWeatherTool[] =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";
const char kWeatherToolLine[] =
    R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";

const char kJsonHead[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
const char kJsonTail[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";
const char kXmlHead[] = "# Tools\n\nYou have access to the following functions:\n\n<tools>\n";

ChatMessage msg(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}
ChatMessage reasoned(std::string content, std::string reasoning) {
  ChatMessage m = msg("assistant", std::move(content));
  m.reasoning_content = std::move(reasoning);
  return m;
}
ChatMessage calling(std::string content, std::vector<ToolCall> calls) {
  ChatMessage m = msg("assistant", std::move(content));
  m.tool_calls = std::move(calls);
  return m;
}

ChatTemplate qwen3() { return test::load_template("qwen3.jinja"); }
ChatTemplate qwen35() { return test::load_template("qwen3.5.jinja"); }

std::string render(const ChatTemplate& t, const std::vector<ChatMessage>& m, const ojson& tools = nullptr,
                   bool gen = false, std::optional<bool> thinking = std::nullopt) {
  RenderedChat out;
  ChatOptions o;
  o.add_generation_prompt = gen;
  o.enable_thinking = thinking;
  Status st = t.render(m, tools, o, &out);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return out.text;
}

TEST(ChatTemplate, FlavourAndThinkingOpenAreReadFromTheTemplate) {
  struct Want {
    const char* file;
    ChatFlavour flavour;
    bool open_default, open_on, open_off;
  } wants[] = {
      {"qwen3.jinja", ChatFlavour::kQwen3Json, false, false, false},
      {"qwen3-next-instruct.jinja", ChatFlavour::kQwen3Json, false, false, false},
      {"qwen3-next-thinking.jinja", ChatFlavour::kQwen3Json, true, true, true},
      {"qwen3.5.jinja", ChatFlavour::kQwen35Xml, true, true, false},
      {"qwen3-coder.jinja", ChatFlavour::kQwen35Xml, false, false, false},
  };
  ojson m = ojson::array({{{"role", "user"}, {"content", "Hi"}}});
  for (const auto& w : wants) {
    ChatTemplate t = test::load_template(w.file);
    EXPECT_EQ(t.flavour(), w.flavour) << w.file;
    for (auto [thinking, want] : {std::pair<std::optional<bool>, bool>{std::nullopt, w.open_default},
                                  {true, w.open_on}, {false, w.open_off}}) {
      RenderedChat out;
      ChatOptions o;
      o.enable_thinking = thinking;
      ASSERT_TRUE(t.render(m, nullptr, o, &out).is_ok());
      EXPECT_EQ(out.opens_thinking, want) << w.file << " thinking=" << (thinking ? (*thinking ? "on" : "off") : "unset");
    }
  }
}

TEST(ChatTemplateLoad, SourcesAndErrorsAtStartUp) {
  std::string dir = test::temp_path("chatdir");
  mkdir(dir.c_str(), 0755);
  ChatTemplate t;
  Status st = ChatTemplate::load(dir, &t);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find(dir + "/tokenizer_config.json"), std::string::npos) << st.message();

  test::write_text(dir + "/tokenizer_config.json", "{\"chat_template\": 3}");
  st = ChatTemplate::load(dir, &t);
  EXPECT_EQ(st.code(), Code::kCorruption);
  EXPECT_NE(st.message().find("tokenizer_config.json"), std::string::npos);

  // A list of named templates: "default" is used; special tokens are variables.
  std::string xml = test::read_text(test::template_path("qwen3.5.jinja"));
  ojson cfg = {{"chat_template", ojson::array({{{"name", "tool_use"}, {"template", "{{ 'x' }}"}},
                                               {{"name", "default"}, {"template", xml}}})},
               {"eos_token", "<|im_end|>"}};
  test::write_text(dir + "/tokenizer_config.json", cfg.dump());
  ASSERT_TRUE(ChatTemplate::load(dir, &t).is_ok());
  EXPECT_EQ(t.flavour(), ChatFlavour::kQwen35Xml);

  // chat_template.jinja wins over tokenizer_config.json.
  test::write_text(dir + "/chat_template.jinja", "<|im_start|>{{ messages[0].content }}{{ eos_token }}");
  ASSERT_TRUE(ChatTemplate::load(dir, &t).is_ok());
  RenderedChat out;
  ASSERT_TRUE(t.render(ChatTemplate::to_json({msg("user", "Hi")}), nullptr, ChatOptions{}, &out).is_ok());
  EXPECT_EQ(out.text, "<|im_start|>Hi<|im_end|>");

  // What the interpreter cannot run is refused at load, naming file, construct and position.
  test::write_text(dir + "/chat_template.jinja", "{% for m in messages %}\n{{ m.content | wordwrap(5) }}{% endfor %}");
  st = ChatTemplate::load(dir, &t);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("chat_template.jinja"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("line 2, column 16: the filter 'wordwrap' is not supported"), std::string::npos)
      << st.message();
  // So is one that fails on the simplest conversation.
  test::write_text(dir + "/chat_template.jinja", "{{ messages[0].content + 1 }}");
  st = ChatTemplate::load(dir, &t);
  EXPECT_NE(st.message().find("fails on a one-message conversation"), std::string::npos) << st.message();
  unlink((dir + "/chat_template.jinja").c_str());
  unlink((dir + "/tokenizer_config.json").c_str());
  rmdir(dir.c_str());
}

TEST(ChatTemplate, KwargsReachTheTemplate) {
  ChatTemplate t = test::load_template("custom.jinja");
  RenderedChat out;
  ChatOptions o;
  o.kwargs = {{"persona", "a pirate"}};
  ASSERT_TRUE(t.render(ChatTemplate::to_json({msg("user", "Hi")}), nullptr, o, &out).is_ok());
  EXPECT_EQ(out.text.rfind("<|im_start|>system\nYou are a pirate.<|im_end|>\n", 0), 0u) << out.text;
}

TEST(ChatTemplateQwen3, BasicTurnsAndGenerationPrompt) {
  ChatTemplate t = qwen3();
  std::vector<ChatMessage> m = {msg("system", "You are terse."), msg("user", "Hi")};
  const std::string base = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n";
  EXPECT_EQ(render(t, m), base);
  EXPECT_EQ(render(t, m, nullptr, true), base + "<|im_start|>assistant\n");
  EXPECT_EQ(render(t, m, nullptr, true, false), base + "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(render(t, {msg("user", "Hi"), msg("assistant", "Hello!")}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n");
  // Contents are not trimmed in this family.
  EXPECT_EQ(render(t, {msg("user", " a \n")}), "<|im_start|>user\n a \n<|im_end|>\n");
  // A system message later in the conversation is an ordinary turn.
  EXPECT_EQ(render(t, {msg("user", "a"), msg("system", "b")}),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>system\nb<|im_end|>\n");
}

TEST(ChatTemplateQwen3, ReasoningOnlyAfterTheLastUserQuery) {
  ChatTemplate t = qwen3();
  EXPECT_EQ(render(t, {msg("user", "Q1"), reasoned("A1", "R1"), msg("user", "Q2")}, nullptr, true),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(t, {msg("user", "Q1"), reasoned("\nA1", "\nR1\n")}),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nR1\n</think>\n\nA1<|im_end|>\n");
  // Without reasoning_content, "<think>R</think>C" in the content is split.
  EXPECT_EQ(render(t, {msg("user", "Q"), msg("assistant", "<think>\nplan\n</think>\n\nanswer")}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nanswer<|im_end|>\n");
  EXPECT_EQ(render(t, {msg("user", "Q"), msg("assistant", "<think>plan</think>answer"), msg("user", "Q2")}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nanswer<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n");
}

TEST(ChatTemplateQwen3, ToolsPreambleCallsAndMergedResponses) {
  ChatTemplate t = qwen3();
  ojson tools = ojson::parse(kWeatherTool);
  EXPECT_EQ(render(t, {msg("user", "Weather?")}, tools),
            std::string("<|im_start|>system\n") + kJsonHead + kWeatherToolLine + kJsonTail +
                "<|im_start|>user\nWeather?<|im_end|>\n");
  EXPECT_EQ(render(t, {msg("system", "Be exact."), msg("user", "Weather?")}, tools),
            std::string("<|im_start|>system\nBe exact.\n\n") + kJsonHead + kWeatherToolLine + kJsonTail +
                "<|im_start|>user\nWeather?<|im_end|>\n");

  ChatMessage call = calling("", {{"call_1", "get_weather", R"({"city": "Paris"})"}});
  call.reasoning_content = "Need weather.";
  std::vector<ChatMessage> m = {msg("user", "Weather in Paris?"), call, msg("tool", "{\"temp\": 21}"),
                                msg("tool", "second"), msg("assistant", "It is 21.")};
  EXPECT_EQ(render(t, m, nullptr, true),
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nNeed weather.\n</think>\n\n"
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<tool_response>\nsecond\n"
            "</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nIt is 21.<|im_end|>\n"
            "<|im_start|>assistant\n");

  // Content before the calls, and a second call, each start on a new line.
  EXPECT_EQ(render(t, {msg("user", "x"), calling("Checking.", {{"a", "f", "{}"}, {"b", "g", "{\"k\": 1}"}})}),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nChecking.\n"
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n"
            "<tool_call>\n{\"name\": \"g\", \"arguments\": {\"k\": 1}}\n</tool_call><|im_end|>\n");
}

TEST(ChatTemplateQwen35, BasicTurnsThinkingAndTrimming) {
  ChatTemplate t = qwen35();
  std::vector<ChatMessage> m = {msg("system", "  S \n"), msg("user", "  Hi\n")};
  const std::string base = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n";
  EXPECT_EQ(render(t, m), base);
  EXPECT_EQ(render(t, m, nullptr, true), base + "<|im_start|>assistant\n<think>\n");
  EXPECT_EQ(render(t, m, nullptr, true, false), base + "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(render(t, {msg("user", "Q1"), reasoned(" A1 ", " R1 "), msg("user", "Q2"), reasoned("A2", "\nR2\n")}),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nR2\n</think>\n\nA2<|im_end|>\n");
  EXPECT_EQ(render(t, {msg("user", "Q"), msg("assistant", "<think>\nplan\n</think>\n\nanswer")}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nanswer<|im_end|>\n");

}

TEST(ChatTemplateQwen35, ToolsPreambleXmlCallsAndMergedResponses) {
  ChatTemplate t = qwen35();
  ojson tools = ojson::parse(kWeatherTool);
  std::string rendered = render(t, {msg("system", "Be exact."), msg("user", "Weather?")}, tools);
  EXPECT_EQ(rendered.substr(0, std::string("<|im_start|>system\n").size() + std::string(kXmlHead).size()),
            std::string("<|im_start|>system\n") + kXmlHead);
  EXPECT_NE(rendered.find(std::string(kXmlHead) + kWeatherToolLine + "\n</tools>\n\nIf you choose to call a function"),
            std::string::npos);
  EXPECT_NE(rendered.find("</IMPORTANT>\n\nBe exact.<|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n"),
            std::string::npos);

  ChatMessage call = calling("", {{"c1", "get_weather",
                                   R"({"city": "Paris", "days": 3, "opts": {"unit": "C"}, "hourly": true, "x": null, "r": 0.5, "tags": ["a", "b"]})"}});
  std::vector<ChatMessage> m = {msg("user", "Weather?"), call, msg("tool", " 21C "), msg("tool", "sunny"),
                                calling("Also:", {{"c2", "f", "{}"}, {"c3", "f", ""}})};
  EXPECT_EQ(render(t, m),
            "<|im_start|>user\nWeather?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"
            "<tool_call>\n<function=get_weather>\n"
            "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
            "<parameter=opts>\n{\"unit\": \"C\"}\n</parameter>\n<parameter=hourly>\nTrue\n</parameter>\n"
            "<parameter=x>\nNone\n</parameter>\n<parameter=r>\n0.5\n</parameter>\n"
            "<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n"
            "</function>\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n21C\n</tool_response>\n<tool_response>\nsunny\n</tool_response>"
            "<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nAlso:\n\n<tool_call>\n<function=f>\n</function>\n</tool_call>"
            "\n<tool_call>\n<function=f>\n</function>\n</tool_call><|im_end|>\n");
}

TEST(ChatTemplateQwen35, RefusesWhatTheRealTemplateRefuses) {
  ChatTemplate t = qwen35();
  RenderedChat out;
  ChatOptions o;
  auto refused = [&](const std::vector<ChatMessage>& m, const char* why) {
    Status st = t.render(m, nullptr, o, &out);
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  refused({msg("system", "s")}, "No user query found in messages.");
  refused({msg("user", "<tool_response>\nx\n</tool_response>")}, "No user query found in messages.");
  refused({msg("user", "a"), msg("system", "late")}, "System message must be at the beginning.");
  refused({msg("user", "a"), calling("", {{"c", "f", "[1]"}})}, "Can only get item pairs from a mapping.");
  refused({msg("developer", "x"), msg("user", "a")}, "Unexpected message role.");
  EXPECT_EQ(t.render(ojson::array(), nullptr, o, &out).code(), Code::kInvalidArgument);
}

TEST(ChatTemplate, FinalUserOffsetIsATokenBoundaryOnEveryTemplate) {
  const Tokenizer& tok = test::qwen3();
  std::vector<std::string> files = test::real_templates();
  files.push_back("custom.jinja");
  for (const std::string& file : files) {
    ChatTemplate t = test::load_template(file);
    std::vector<ChatMessage> m = {msg("system", "S"), msg("user", "first question"), reasoned("answer", "why"),
                                  msg("user", "QUESTION-TWO  asked\n"), calling("", {{"c", "get_weather", "{\"city\": \"x\"}"}}),
                                  msg("tool", "result")};
    RenderedChat out;
    ChatOptions o;
    ASSERT_TRUE(t.render(m, ojson::parse(kWeatherTool), o, &out).is_ok()) << file;
    ASSERT_NE(out.final_user_offset, RenderedChat::npos) << file;
    EXPECT_EQ(out.text.compare(out.final_user_offset, 12, "<|im_start|>"), 0) << file;
    EXPECT_NE(out.text.find("QUESTION-TWO", out.final_user_offset), std::string::npos) << file;
    EXPECT_EQ(out.text.find("QUESTION-TWO"), out.text.find("QUESTION-TWO", out.final_user_offset)) << file;
    EXPECT_EQ(out.text.rfind("<|im_start|>", out.text.find("QUESTION-TWO")), out.final_user_offset) << file;
    std::vector<int32_t> whole = tok.encode(out.text);
    std::vector<int32_t> left = tok.encode(out.text.substr(0, out.final_user_offset));
    std::vector<int32_t> right = tok.encode(out.text.substr(out.final_user_offset));
    ASSERT_LT(left.size(), whole.size());
    EXPECT_EQ(whole[left.size()], *tok.token_id("<|im_start|>"));
    left.insert(left.end(), right.begin(), right.end());
    EXPECT_EQ(whole, left) << file;
  }
  RenderedChat out;
  ASSERT_TRUE(qwen3().render({msg("system", "only")}, nullptr, ChatOptions{}, &out).is_ok());
  EXPECT_EQ(out.final_user_offset, RenderedChat::npos);
}

}  // namespace
}  // namespace sb
