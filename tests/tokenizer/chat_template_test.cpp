// Chat rendering against fixed expected strings, for both families: system,
// user, assistant, reasoning (kept after the last user query, dropped
// before), embedded <think>, tools preamble, tool calls (JSON and XML forms),
// merged tool responses, thinking on/off, generation prompt; plus template
// detection, loading errors and the final-user-offset boundary property.
// (chat_reference_test checks the same shapes against the real template run
// by jinja2.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/tokenizer/test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace sb {
namespace {

using ojson = nlohmann::ordered_json;

// Minimal template sources that carry only the markers the detection reads
// (ChatML, the XML call syntax, reasoning, the thinking switch). They have no
// tools preamble text, so rendering falls back to the built-in preambles.
const char kXmlSource[] =
    "{{- '<|im_start|>' + message.role }}{# <function=name> reasoning_content #}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}{{- '<think>\\n' }}{%- endif %}";
const char kJsonSource[] =
    "{{- '<|im_start|>' + message.role }}{# reasoning_content #}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}";
const char kThinkingSource[] = "{{- '<|im_start|>' }}{# reasoning_content #}{{- '<|im_start|>assistant\\n<think>\\n' }}";
const char kInstructSource[] = "{{- '<|im_start|>' + message.role + '\\n' + content }}{{- '<|im_start|>assistant\\n' }}";

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

ChatTemplate from(const char* src) {
  ChatTemplate t;
  Status st = ChatTemplate::from_source(src, &t);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return t;
}

ChatTemplate qwen3() {
  ChatTemplate t;
  Status st = ChatTemplate::load(test::tokenizer_dir(), &t);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return t;
}

std::string render(const ChatTemplate& t, const std::vector<ChatMessage>& m, const ojson& tools = nullptr,
                   bool gen = false, std::optional<bool> thinking = std::nullopt) {
  RenderedChat out;
  Status st = t.render(m, tools, gen, thinking.value_or(t.thinking_default()), &out);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return out.text;
}

TEST(ChatTemplateDetect, FamiliesAndThinkingVariants) {
  ChatTemplate q3 = qwen3();
  EXPECT_EQ(q3.flavour(), ChatFlavour::kQwen3Json);
  EXPECT_EQ(q3.thinking_prompt(), ThinkingPrompt::kEmptyWhenDisabled);
  EXPECT_TRUE(q3.thinking_default());
  EXPECT_FALSE(q3.prompt_opens_thinking(true));

  ChatTemplate x = from(kXmlSource);
  EXPECT_EQ(x.flavour(), ChatFlavour::kQwen35Xml);
  EXPECT_EQ(x.thinking_prompt(), ThinkingPrompt::kOpenByDefault);
  EXPECT_TRUE(x.prompt_opens_thinking(true));
  EXPECT_FALSE(x.prompt_opens_thinking(false));

  EXPECT_EQ(from(kThinkingSource).thinking_prompt(), ThinkingPrompt::kAlwaysOpen);
  EXPECT_EQ(from(kInstructSource).thinking_prompt(), ThinkingPrompt::kNone);
  EXPECT_FALSE(from(kInstructSource).thinking_default());

  ChatTemplate bad;
  EXPECT_EQ(ChatTemplate::from_source("{{ messages }}", &bad).code(), Code::kUnsupported);
}

TEST(ChatTemplateLoad, SourcesAndErrors) {
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

  // A list of named templates: "default" is used.
  ojson cfg = {{"chat_template", ojson::array({{{"name", "tool_use"}, {"template", kJsonSource}},
                                               {{"name", "default"}, {"template", kXmlSource}}})}};
  test::write_text(dir + "/tokenizer_config.json", cfg.dump());
  ASSERT_TRUE(ChatTemplate::load(dir, &t).is_ok());
  EXPECT_EQ(t.flavour(), ChatFlavour::kQwen35Xml);

  // chat_template.jinja wins over tokenizer_config.json.
  test::write_text(dir + "/chat_template.jinja", kThinkingSource);
  ASSERT_TRUE(ChatTemplate::load(dir, &t).is_ok());
  EXPECT_EQ(t.thinking_prompt(), ThinkingPrompt::kAlwaysOpen);
  test::write_text(dir + "/chat_template.jinja", "not a chat template");
  st = ChatTemplate::load(dir, &t);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_NE(st.message().find("chat_template.jinja"), std::string::npos);
  unlink((dir + "/chat_template.jinja").c_str());
  unlink((dir + "/tokenizer_config.json").c_str());
  rmdir(dir.c_str());
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
  ChatTemplate t = from(kXmlSource);
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

  ChatTemplate small = from(
      "{{- '<|im_start|>' }}{# <function= reasoning_content #}{%- if enable_thinking is defined and enable_thinking "
      "is true %}{{- '<think>\\n' }}{%- else %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}");
  EXPECT_FALSE(small.thinking_default());
  EXPECT_EQ(render(small, {msg("user", "Hi")}, nullptr, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(render(small, {msg("user", "Hi")}, nullptr, true, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
}

TEST(ChatTemplateQwen35, ToolsPreambleXmlCallsAndMergedResponses) {
  ChatTemplate t = from(kXmlSource);
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
  ChatTemplate t = from(kXmlSource);
  RenderedChat out;
  EXPECT_EQ(t.render({msg("system", "s")}, nullptr, true, true, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(t.render({msg("user", "<tool_response>\nx\n</tool_response>")}, nullptr, true, true, &out).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(t.render({msg("user", "a"), msg("system", "late")}, nullptr, true, true, &out).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(t.render({msg("user", "a"), calling("", {{"c", "f", "[1]"}})}, nullptr, false, true, &out).code(),
            Code::kInvalidArgument);
  ChatTemplate q3 = qwen3();
  for (const ChatTemplate* tt : {&t, &q3}) {
    EXPECT_EQ(tt->render({msg("developer", "x"), msg("user", "a")}, nullptr, true, true, &out).code(),
              Code::kInvalidArgument);
    EXPECT_EQ(tt->render({}, nullptr, true, true, &out).code(), Code::kInvalidArgument);
  }
}

TEST(ChatTemplate, PreambleFromTheCheckpointEqualsTheBuiltInOne) {
  // The real Qwen3 template's own preamble text (extracted at load) and the
  // built-in fallback (used with a source that has none) render identically.
  ojson tools = ojson::parse(kWeatherTool);
  std::vector<ChatMessage> m = {msg("system", "S"), msg("user", "Hi")};
  EXPECT_EQ(render(qwen3(), m, tools, true), render(from(kJsonSource), m, tools, true));
}

TEST(ChatTemplate, FinalUserOffsetIsATokenBoundary) {
  const Tokenizer& tok = test::qwen3();
  for (const ChatTemplate& t : {qwen3(), from(kXmlSource)}) {
    std::vector<ChatMessage> m = {msg("system", "S"), msg("user", "first question"), reasoned("answer", "why"),
                                  msg("user", "QUESTION-TWO  asked\n"), calling("", {{"c", "f", "{\"q\": 1}"}}),
                                  msg("tool", "result")};
    RenderedChat out;
    ASSERT_TRUE(t.render(m, ojson::parse(kWeatherTool), true, true, &out).is_ok());
    ASSERT_NE(out.final_user_offset, RenderedChat::npos);
    EXPECT_EQ(out.text.compare(out.final_user_offset, 17, "<|im_start|>user\n"), 0);
    EXPECT_NE(out.text.find("QUESTION-TWO", out.final_user_offset), std::string::npos);
    EXPECT_EQ(out.text.find("QUESTION-TWO"), out.text.find("QUESTION-TWO", out.final_user_offset));
    std::vector<int32_t> whole = tok.encode(out.text);
    std::vector<int32_t> left = tok.encode(out.text.substr(0, out.final_user_offset));
    std::vector<int32_t> right = tok.encode(out.text.substr(out.final_user_offset));
    ASSERT_LT(left.size(), whole.size());
    EXPECT_EQ(whole[left.size()], *tok.token_id("<|im_start|>"));
    left.insert(left.end(), right.begin(), right.end());
    EXPECT_EQ(whole, left);
  }
  RenderedChat out;
  ASSERT_TRUE(qwen3().render({msg("system", "only")}, nullptr, true, true, &out).is_ok());
  EXPECT_EQ(out.final_user_offset, RenderedChat::npos);
}

}  // namespace
}  // namespace sb
