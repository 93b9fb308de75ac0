// Messages parsing: Anthropic's body into the chat request the template
// renders (the same messages a chat completion of the conversation gives),
// its fields' effects, and errors naming the field.
#include "server/protocols/anthropic/messages_parse.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/server/protocols/parse_errors.h"

namespace sb {
namespace {

using json = nlohmann::ordered_json;

ParseLimits limits() { return testing::parse_limits(4096, 16); }

json base() {
  return json::parse(R"({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})");
}

// The error a body raises, or a 0-status error when it parses.
ApiError error_of(const json& body) {
  return testing::parse_error([&] { parse_messages_params(body, limits()); });
}

const json kWeatherTool = json::parse(R"({"name": "weather", "description": "Forecast.",
  "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}})");

TEST(MessagesParse, ConversationWithToolsBecomesTheChatMessages) {
  json body = base();
  body["system"] = json::parse(R"([{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}])");
  body["tools"] = json::array({kWeatherTool});
  body["messages"] = json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "Snow"}]},
      {"type": "text", "text": "Thanks"}]}])");
  const ChatParams p = parse_messages_params(body, limits()).chat;
  const json want = json::parse(R"([
    {"role": "system", "content": "Be brief.\n\nBe kind."},
    {"role": "user", "content": "a\n\nb"},
    {"role": "assistant", "content": "Let me look.", "reasoning_content": "hmm",
     "tool_calls": [{"type": "function", "id": "t1", "function": {"name": "weather", "arguments": {"city": "Oslo"}}}]},
    {"role": "tool", "content": "Snow", "tool_call_id": "t1"},
    {"role": "user", "content": "Thanks"}])");
  EXPECT_EQ(p.messages, want);
  ASSERT_EQ(p.tools.size(), 1u);
  EXPECT_EQ(p.tools[0]["function"]["parameters"], kWeatherTool["input_schema"]);
  EXPECT_EQ(p.tools[0]["function"]["name"], "weather");
  EXPECT_EQ(p.max_tokens, 10);
  EXPECT_EQ(p.tool_choice, "auto");
}

TEST(MessagesParse, ToolChoiceThinkingSamplingAndStops) {
  json body = base();
  body["tools"] = json::array({kWeatherTool});
  body["tool_choice"] = {{"type", "any"}, {"disable_parallel_tool_use", true}};
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  body["temperature"] = 0.5;
  body["top_k"] = 7;
  body["stop_sequences"] = {"END", ""};
  ChatParams p = parse_messages_params(body, limits()).chat;
  EXPECT_EQ(p.tool_choice, "required");
  EXPECT_FALSE(p.parallel_tool_calls);
  EXPECT_EQ(p.enable_thinking, std::optional<bool>(true));
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  EXPECT_EQ(p.sampling.top_k, 7);
  EXPECT_EQ(p.stop, std::vector<std::string>{"END"});
  body["tool_choice"] = {{"type", "tool"}, {"name", "weather"}};
  body["thinking"] = {{"type", "disabled"}};
  p = parse_messages_params(body, limits()).chat;
  EXPECT_EQ(p.tool_choice, "weather");
  EXPECT_TRUE(p.tool_choice_named);
  EXPECT_EQ(p.enable_thinking, std::optional<bool>(false));
  body["thinking"] = {{"type", "adaptive"}, {"display", "omitted"}};
  EXPECT_FALSE(parse_messages_params(body, limits()).chat.enable_thinking.has_value());
}

TEST(MessagesParse, CacheControlMarksPrefixesWithTheirTtl) {
  json body = base();
  body["tools"] = json::array({kWeatherTool});
  body["system"] =
      json::parse(R"([{"type": "text", "text": "S", "cache_control": {"type": "ephemeral", "ttl": "1h"}}])");
  body["messages"] = json::parse(
      R"([{"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "more"}]}])");
  const MessagesParams p = parse_messages_params(body, limits());
  ASSERT_EQ(p.breakpoints.size(), 2u);
  EXPECT_EQ(p.breakpoints[0].ttl_s, 3600);
  EXPECT_EQ(p.breakpoints[0].prefix.messages, json::parse(R"([{"role": "system", "content": "S"}])"));
  EXPECT_EQ(p.breakpoints[0].prefix.tools, p.chat.tools);
  EXPECT_EQ(p.breakpoints[1].ttl_s, 300);
  EXPECT_EQ(p.breakpoints[1].prefix.messages,
            json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "q"}])"));
}

TEST(MessagesParse, NoOpFieldsClaudeCodeSendsAreAccepted) {
  json body = base();
  body["metadata"] = {{"user_id", "u"}};
  body["context_management"] = {{"edits", json::array()}};
  body["output_config"] = {{"effort", "high"}};
  body["service_tier"] = "auto";
  body["messages"].push_back({{"role", "system"}, {"content", "environment"}});
  body["messages"].push_back({{"role", "user"}, {"content", "next"}});
  EXPECT_EQ(error_of(body).status, 0) << error_of(body).message;
  EXPECT_EQ(parse_messages_params(body, limits()).chat.messages[1],
            json::parse(R"({"role": "system", "content": "environment"})"));
}

struct Refused {
  const char* patch;  // merged into base()
  const char* param;  // what the error names
};

TEST(MessagesParse, RefusalsNameTheField) {
  const Refused cases[] = {
      {R"({"max_tokens": null})", "max_tokens"},
      {R"({"model": 3})", "model"},
      // Read from text, 0 is an unsigned number: the lower bound held only for signed ones (found by the mutations).
      {R"({"max_tokens": 0})", "max_tokens"},
      {R"({"temperature": 1.5})", "temperature"},
      {R"({"container": "c"})", "container"},
      {R"({"unknown_field": 1})", "unknown_field"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})",
       "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]})",
       "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "video"}]}]})", "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]})",
       "messages[0].content[0].tool_use_id"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "prefill"}]})",
       "messages[1]"},
      {R"({"messages": [{"role": "tool", "content": "a"}]})", "messages[0].role"},
      {R"({"tools": [{"name": "t"}]})", "tools[0].input_schema"},
      {R"({"tool_choice": {"type": "tool", "name": "missing"}})", "tool_choice.name"},
      {R"({"thinking": {"type": "always"}})", "thinking.type"},
      {R"({"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "2h"}}]})",
       "system[0].cache_control.ttl"},
  };
  for (const auto& c : cases) {
    json body = base();
    body.merge_patch(json::parse(c.patch));
    if (json::parse(c.patch).value("max_tokens", json(1)).is_null()) body["max_tokens"] = nullptr;
    const ApiError e = error_of(body);
    EXPECT_EQ(e.status, 400) << c.patch;
    EXPECT_EQ(e.param, c.param) << c.patch << ": " << e.message;
  }
}

TEST(MessagesParse, AToolResultAnswersOnlyThePreviousAssistantsCalls) {
  json body = base();
  body["messages"] = json::parse(R"([{"role": "user", "content": "q"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "again"}]}])");
  EXPECT_EQ(error_of(body).param, "messages[3].content[0].tool_use_id");
  body["messages"].erase(3);
  EXPECT_EQ(error_of(body).status, 0) << error_of(body).message;
}

TEST(MessagesParse, ServerToolsAreLeftOutWithAWarning) {
  json body = base();
  body["tools"] = json::parse(R"([{"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    {"name": "get_weather", "input_schema": {"type": "object"}},
    {"type": "code_execution_20250522", "name": "code_execution"}])");
  MessagesParams p = parse_messages_params(body, limits());
  ASSERT_EQ(p.chat.tools.size(), 1u);
  EXPECT_EQ(p.chat.tools[0]["function"]["name"], "get_weather");
  ASSERT_EQ(p.warnings.size(), 2u);
  EXPECT_EQ(p.warnings[0].rfind("tools[0]: ", 0), 0u) << p.warnings[0];
  EXPECT_NE(p.warnings[1].find("code_execution_20250522"), std::string::npos) << p.warnings[1];
  body["tools"].erase(2);
  body["tools"].erase(0);
  EXPECT_EQ(parse_messages_params(body, limits()).chat.tools, p.chat.tools);
  EXPECT_TRUE(parse_messages_params(body, limits()).warnings.empty());
}

TEST(MessagesParse, ClaudeCodesBillingHeaderIsLeftOutOfThePrompt) {
  json body = base();
  body["system"] = json::parse(R"([
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.0b8; cc_entrypoint=sdk-cli;"},
    {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}])");
  MessagesParams p = parse_messages_params(body, limits());
  EXPECT_EQ(p.chat.messages[0], json::parse(R"({"role": "system", "content": "You are an agent."})"));
  ASSERT_EQ(p.breakpoints.size(), 1u);
  EXPECT_EQ(p.breakpoints[0].prefix.messages[0], p.chat.messages[0]);
  // Another session's header (the suffix changes) gives the same prompt.
  json other = body;
  other["system"][0]["text"] = "x-anthropic-billing-header: cc_version=2.1.332.f3a; cc_entrypoint=sdk-cli;";
  EXPECT_EQ(parse_messages_params(other, limits()).chat.messages, p.chat.messages);
  // --keep-billing-header keeps it; elsewhere (a user's text) it is text like any other.
  ParseLimits keep = limits();
  keep.keep_billing_header = true;
  EXPECT_EQ(parse_messages_params(body, keep).chat.messages[0]["content"].get<std::string>().rfind(
                kBillingHeaderPrefix, 0),
            0u);
  body["messages"][0]["content"] = body["system"][0]["text"];
  EXPECT_EQ(parse_messages_params(body, limits()).chat.messages[1]["content"], body["system"][0]["text"]);
}

TEST(MessagesParse, CountTokensNeedsNoMaxTokens) {
  json body = base();
  body.erase("max_tokens");
  EXPECT_EQ(error_of(body).param, "max_tokens");
  EXPECT_NO_THROW(parse_messages_params(body, limits(), /*count_only=*/true));
}

}  // namespace
}  // namespace sb
