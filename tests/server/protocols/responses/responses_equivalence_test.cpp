// One conversation with tools, reasoning and a tool result, sent as a chat
// completions body, as a Responses body and as a Messages body, through each
// route's own prepare (the code the server runs) over a real model backend:
// the same prompt token ids, the same grammar need, the same limits. For the
// JSON tool-call template (Qwen3-Next) and the XML one (Qwen3.5).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/backend/engine_backend.h"
#include "server/protocols/anthropic/anthropic_renderer.h"
#include "server/protocols/completion_setup.h"
#include "server/protocols/openai/openai_renderer.h"
#include "server/protocols/responses/responses_protocol.h"
#include "tests/util/models.h"

namespace sb {
namespace {

using json = nlohmann::ordered_json;

const json kParameters = {{"type", "object"},
                          {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}},
                          {"required", {"city"}}};

json chat_body() {
  return json{
      {"messages",
       {{{"role", "system"}, {"content", "You are a weather helper."}},
        {{"role", "user"}, {"content", "Weather in Paris for 2 days?"}},
        {{"role", "assistant"},
         {"content", "Let me check."},
         {"reasoning_content", "The user wants a forecast."},
         {"tool_calls",
          {{{"id", "call_1"},
            {"type", "function"},
            {"function", {{"name", "forecast"}, {"arguments", "{\"city\":\"Paris\",\"days\":2}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Sunny, 21 C."}},
        {{"role", "assistant"}, {"content", "It will be sunny."}},
        {{"role", "user"}, {"content", "And in Oslo?"}}}},
      {"tools",
       {{{"type", "function"},
         {"function", {{"name", "forecast"}, {"description", "A city's forecast"}, {"parameters", kParameters}}}}}},
      {"max_tokens", 5}};
}

json responses_body() {
  return json{
      {"instructions", "You are a weather helper."},
      {"input",
       {{{"role", "user"}, {"content", "Weather in Paris for 2 days?"}},
        {{"type", "reasoning"},
         {"id", "rs_1"},
         {"summary", json::array()},
         {"content", {{{"type", "reasoning_text"}, {"text", "The user wants a forecast."}}}}},
        {{"type", "message"},
         {"role", "assistant"},
         {"content", {{{"type", "output_text"}, {"text", "Let me check."}, {"annotations", json::array()}}}}},
        {{"type", "function_call"},
         {"call_id", "call_1"},
         {"name", "forecast"},
         {"arguments", "{\"city\":\"Paris\",\"days\":2}"}},
        {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "Sunny, 21 C."}},
        {{"type", "message"},
         {"role", "assistant"},
         {"content", {{{"type", "output_text"}, {"text", "It will be sunny."}}}}},
        {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "And in Oslo?"}}}}}}},
      {"tools",
       {{{"type", "function"},
         {"name", "forecast"},
         {"description", "A city's forecast"},
         {"parameters", kParameters}}}},
      {"max_output_tokens", 5}};
}

json messages_body() {
  return json{{"model", "tiny"},
              {"system", "You are a weather helper."},
              {"messages",
               {{{"role", "user"}, {"content", "Weather in Paris for 2 days?"}},
                {{"role", "assistant"},
                 {"content",
                  {{{"type", "thinking"}, {"thinking", "The user wants a forecast."}, {"signature", "sig"}},
                   {{"type", "text"}, {"text", "Let me check."}},
                   {{"type", "tool_use"},
                    {"id", "call_1"},
                    {"name", "forecast"},
                    {"input", {{"city", "Paris"}, {"days", 2}}}}}}},
                {{"role", "user"},
                 {"content", {{{"type", "tool_result"}, {"tool_use_id", "call_1"}, {"content", "Sunny, 21 C."}}}}},
                {{"role", "assistant"}, {"content", "It will be sunny."}},
                {{"role", "user"}, {"content", "And in Oslo?"}}}},
              {"tools", {{{"name", "forecast"}, {"description", "A city's forecast"}, {"input_schema", kParameters}}}},
              {"max_tokens", 5}};
}

std::unique_ptr<EngineBackend> backend(Arch arch) {
  EngineBackendOptions o;
  o.model_dir = testing::tiny_checkpoint(arch, 3);
  o.model_id = "tiny";
  std::unique_ptr<EngineBackend> b;
  Status s = EngineBackend::open(o, &b);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return b;
}

PreparedCompletion prepare(const Backend& b, const Protocol& protocol, const json& body) {
  ParseLimits limits;
  limits.vocab_size = b.vocab_size();
  limits.max_prompt_tokens = b.context_length();
  const std::string text = body.dump();
  CompletionInput in;
  in.body = text;
  in.request_id = "r1";
  return protocol.prepare(b, limits, in);
}

class ResponsesEquivalence : public ::testing::TestWithParam<Arch> {};

TEST_P(ResponsesEquivalence, ChatAndResponsesRenderTheSamePromptIds) {
  std::unique_ptr<EngineBackend> b = backend(GetParam());
  ASSERT_TRUE(b);
  for (const char* tool_choice : {"auto", "required", "none"}) {
    json chat = chat_body(), responses = responses_body();
    chat["tool_choice"] = tool_choice;
    responses["tool_choice"] = tool_choice;
    PreparedCompletion a = prepare(*b, openai_protocol(true), chat);
    PreparedCompletion r = prepare(*b, responses_protocol(), responses);
    ASSERT_GT(a.request.prompt.size(), 50u);
    EXPECT_EQ(a.request.prompt, r.request.prompt) << tool_choice;
    EXPECT_EQ(a.request.message_boundary, r.request.message_boundary) << tool_choice;
    EXPECT_EQ(a.request.max_tokens, r.request.max_tokens);
    EXPECT_EQ(static_cast<bool>(a.request.make_processor), static_cast<bool>(r.request.make_processor)) << tool_choice;
    EXPECT_EQ(a.setup.max_tool_calls, r.setup.max_tool_calls);
  }
  // Thinking switched off both ways renders the same prompt too.
  json chat = chat_body(), responses = responses_body();
  chat["chat_template_kwargs"] = {{"enable_thinking", false}};
  responses["reasoning"] = {{"effort", "none"}};
  EXPECT_EQ(prepare(*b, openai_protocol(true), chat).request.prompt,
            prepare(*b, responses_protocol(), responses).request.prompt);
}

TEST_P(ResponsesEquivalence, ChatAndMessagesRenderTheSamePromptIds) {
  std::unique_ptr<EngineBackend> b = backend(GetParam());
  ASSERT_TRUE(b);
  const std::pair<const char*, const char*> choices[] = {{"auto", "auto"}, {"required", "any"}, {"none", "none"}};
  for (const auto& [chat_choice, messages_choice] : choices) {
    json chat = chat_body(), messages = messages_body();
    chat["tool_choice"] = chat_choice;
    messages["tool_choice"] = {{"type", messages_choice}};
    PreparedCompletion a = prepare(*b, openai_protocol(true), chat);
    PreparedCompletion m;
    try {
      m = prepare(*b, messages_protocol(), messages);
    } catch (const ApiException& e) {
      FAIL() << e.error.message << " (" << e.error.param << ")";
    }
    ASSERT_GT(a.request.prompt.size(), 50u);
    EXPECT_EQ(a.request.prompt, m.request.prompt) << chat_choice;
    EXPECT_EQ(a.request.message_boundary, m.request.message_boundary) << chat_choice;
    EXPECT_EQ(a.request.max_tokens, m.request.max_tokens);
    EXPECT_EQ(static_cast<bool>(a.request.make_processor), static_cast<bool>(m.request.make_processor)) << chat_choice;
    EXPECT_EQ(a.setup.max_tool_calls, m.setup.max_tool_calls);
  }
  json chat = chat_body(), messages = messages_body();
  chat["chat_template_kwargs"] = {{"enable_thinking", false}};
  messages["thinking"] = {{"type", "disabled"}};
  EXPECT_EQ(prepare(*b, openai_protocol(true), chat).request.prompt,
            prepare(*b, messages_protocol(), messages).request.prompt);
  // A different conversation renders other ids: the comparison can fail.
  messages["messages"][4]["content"] = "And in Rome?";
  EXPECT_NE(prepare(*b, openai_protocol(true), chat).request.prompt,
            prepare(*b, messages_protocol(), messages).request.prompt);
}

TEST_P(ResponsesEquivalence, ErrorsOfTheChatPathNameResponsesFields) {
  std::unique_ptr<EngineBackend> b = backend(GetParam());
  ASSERT_TRUE(b);
  json body = responses_body();
  body["model"] = "not-this-one";
  try {
    prepare(*b, responses_protocol(), body);
    FAIL() << "no error";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error.status, 404);
    EXPECT_EQ(e.error.param, "model");
  }
  body = responses_body();
  body["input"][4]["call_id"] = "call_2";
  try {
    prepare(*b, responses_protocol(), body);
    FAIL() << "no error";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error.status, 400);
    EXPECT_EQ(e.error.param, "input[4].call_id");
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, ResponsesEquivalence, ::testing::Values(Arch::kQwen3Next, Arch::kQwen35));

}  // namespace
}  // namespace sb
