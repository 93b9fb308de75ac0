// Responses request parsing: Responses bodies become the chat request that
// asks for the same thing; every field is used or refused by its Responses name.
#include "server/protocols/responses/responses_parse.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/server/protocols/parse_errors.h"

namespace sb {
namespace {

using json = nlohmann::ordered_json;

ParseLimits limits() { return testing::parse_limits(4096); }

ApiError responses_error(const json& body) {
  return testing::parse_error([&] { parse_responses_params(body, limits()); });
}

const json kWeatherTool = {
    {"type", "function"},
    {"name", "get_weather"},
    {"description", "Weather of a city"},
    {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}},
    {"strict", true}};

// A tool-using conversation as Codex and the Agents SDK send it.
json tool_conversation() {
  return json::array(
      {{{"type", "message"}, {"role", "developer"}, {"content", {{{"type", "input_text"}, {"text", "Be brief."}}}}},
       {{"role", "user"}, {"content", "Weather in Paris?"}},
       {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", {{{"type", "summary_text"}, {"text", "Need the tool."}}}}},
       {{"type", "message"},
        {"role", "assistant"},
        {"id", "msg_1"},
        {"status", "completed"},
        {"content", {{{"type", "output_text"}, {"text", "Checking."}, {"annotations", json::array()}}}}},
       {{"type", "function_call"},
        {"id", "fc_1"},
        {"call_id", "call_1"},
        {"name", "get_weather"},
        {"arguments", "{\"city\":\"Paris\"}"}},
       {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "18 C"}},
       {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "Thanks"}}}}}});
}

TEST(ResponsesParse, ConversationBecomesTheChatMessages) {
  json body = {
      {"model", "m"}, {"instructions", "You are a helper."}, {"input", tool_conversation()}, {"tools", {kWeatherTool}}};
  ResponsesParams p = parse_responses_params(body, limits());
  const json& m = p.chat.messages;
  ASSERT_EQ(m.size(), 6u) << m.dump();
  EXPECT_EQ(m[0], (json{{"role", "system"}, {"content", "You are a helper."}}));
  EXPECT_EQ(m[1], (json{{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(m[2], (json{{"role", "user"}, {"content", "Weather in Paris?"}}));
  EXPECT_EQ(m[3]["role"], "assistant");
  EXPECT_EQ(m[3]["content"], "Checking.");
  EXPECT_EQ(m[3]["reasoning_content"], "Need the tool.");
  ASSERT_EQ(m[3]["tool_calls"].size(), 1u);
  EXPECT_EQ(m[3]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m[3]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[3]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_EQ(m[4], (json{{"role", "tool"}, {"content", "18 C"}, {"tool_call_id", "call_1"}}));
  EXPECT_EQ(m[5], (json{{"role", "user"}, {"content", "Thanks"}}));
  ASSERT_EQ(p.chat.tools.size(), 1u);
  EXPECT_EQ(p.chat.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(p.chat.tools[0]["function"]["parameters"], kWeatherTool["parameters"]);
  EXPECT_EQ(p.instructions, "You are a helper.");
  EXPECT_EQ(p.tools[0], kWeatherTool);
}

TEST(ResponsesParse, SameConversationAsChatGivesTheSameChatParams) {
  json responses = {{"instructions", "You are a helper."},
                    {"input", tool_conversation()},
                    {"tools", {kWeatherTool}},
                    {"max_output_tokens", 9},
                    {"temperature", 0.5},
                    {"top_p", 0.75},
                    {"tool_choice", "required"},
                    {"parallel_tool_calls", false}};
  json chat = {{"messages",
                {{{"role", "system"}, {"content", "You are a helper."}},
                 {{"role", "developer"}, {"content", "Be brief."}},
                 {{"role", "user"}, {"content", "Weather in Paris?"}},
                 {{"role", "assistant"},
                  {"content", "Checking."},
                  {"reasoning_content", "Need the tool."},
                  {"tool_calls",
                   {{{"id", "call_1"},
                     {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}},
                 {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18 C"}},
                 {{"role", "user"}, {"content", "Thanks"}}}},
               {"tools",
                {{{"type", "function"},
                  {"function",
                   {{"name", "get_weather"},
                    {"description", "Weather of a city"},
                    {"parameters", kWeatherTool["parameters"]},
                    {"strict", true}}}}}},
               {"max_tokens", 9},
               {"temperature", 0.5},
               {"top_p", 0.75},
               {"tool_choice", "required"},
               {"parallel_tool_calls", false}};
  ChatParams a = parse_responses_params(responses, limits()).chat;
  ChatParams b = parse_chat_params(chat, limits());
  EXPECT_EQ(a.messages.dump(), b.messages.dump());
  EXPECT_EQ(a.tools.dump(), b.tools.dump());
  EXPECT_EQ(a.tool_choice, b.tool_choice);
  EXPECT_EQ(a.parallel_tool_calls, b.parallel_tool_calls);
  EXPECT_EQ(a.max_tokens, b.max_tokens);
  EXPECT_EQ(a.sampling.temperature, b.sampling.temperature);
  EXPECT_EQ(a.sampling.top_p, b.sampling.top_p);
}

TEST(ResponsesParse, CodexFieldsAreAccepted) {
  json body = {
      {"model", "demo"},
      {"input", {{{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}},
      {"tools", {kWeatherTool}},
      {"tool_choice", "auto"},
      {"parallel_tool_calls", true},
      {"reasoning", {{"summary", "auto"}}},
      {"store", false},
      {"stream", true},
      {"include", {"reasoning.encrypted_content"}},
      {"prompt_cache_key", "0192-session"},
      {"client_metadata", {{"turn_id", "t1"}}},
      {"metadata", {{"k", "v"}}},
      {"service_tier", "auto"},
      {"truncation", "disabled"},
      {"user", "u"},
      {"safety_identifier", "s"},
      {"stream_options", {{"include_obfuscation", false}}}};
  ResponsesParams p = parse_responses_params(body, limits());
  EXPECT_TRUE(p.chat.stream);
  EXPECT_TRUE(p.reasoning_summary);
  EXPECT_FALSE(p.output_logprobs);
  EXPECT_FALSE(p.chat.enable_thinking.has_value());
  EXPECT_EQ(p.metadata, (json{{"k", "v"}}));
}

// The bodies Codex CLI 0.171.0 sent (tests/data/agents/codex-0.171.0).
json codex_body(const std::string& name) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  if (!src) {
    ADD_FAILURE() << "SB_SOURCE_DIR is not set (run through ctest)";
    return json::object();
  }
  std::ifstream in(std::string(src) + "/tests/data/agents/codex-0.171.0/" + name);
  return json::parse(in);
}

TEST(ResponsesParse, CodexBodiesAsSent) {
  ResponsesParams first = parse_responses_params(codex_body("turn.json"), limits());
  EXPECT_EQ(first.chat.messages.size(), 4u);
  EXPECT_EQ(first.chat.messages[0]["role"], "system");  // developer
  EXPECT_EQ(first.chat.messages[3], (json{{"role", "user"}, {"content", "say hi"}}));
  EXPECT_EQ(first.chat.tools.size(), 7u);
  EXPECT_TRUE(first.chat.stream);
  ResponsesParams next = parse_responses_params(codex_body("tool_output_turn.json"), limits());
  ASSERT_EQ(next.chat.messages.size(), 6u);
  EXPECT_EQ(next.chat.messages[4]["tool_calls"][0]["function"]["name"], "exec_command");
  EXPECT_EQ(next.chat.messages[5]["role"], "tool");
  EXPECT_EQ(next.chat.messages[5]["tool_call_id"], next.chat.messages[4]["tool_calls"][0]["id"]);
  ResponsesParams resumed = parse_responses_params(codex_body("resumed_turn.json"), limits());
  ASSERT_EQ(resumed.chat.messages.size(), 8u);
  EXPECT_EQ(resumed.chat.messages[6], (json{{"role", "assistant"}, {"content", "hello"}}));
  EXPECT_EQ(resumed.chat.messages[7], (json{{"role", "user"}, {"content", "again"}}));
  // Codex's defaults add the built-in web search and a namespace of sub-agent
  // tools: the search is left out with a warning, the namespace's functions
  // are offered under Codex's flat names.
  json with_defaults = codex_body("turn.json");
  with_defaults["tools"].push_back({{"type", "web_search"}, {"external_web_access", false}});
  with_defaults["tools"].push_back({{"type", "namespace"},
                                    {"name", "multi_agent_v1"},
                                    {"description", "Sub-agents."},
                                    {"tools", json::array({{{"type", "function"},
                                                            {"name", "spawn_agent"},
                                                            {"parameters", {{"type", "object"}}}}})}});
  ResponsesParams defaults = parse_responses_params(with_defaults, limits());
  ASSERT_EQ(defaults.chat.tools.size(), 8u);
  EXPECT_EQ(defaults.chat.tools[7]["function"]["name"], "multi_agent_v1__spawn_agent");
  ASSERT_EQ(defaults.warnings.size(), 1u);
  EXPECT_NE(defaults.warnings[0].find("tools[7]"), std::string::npos) << defaults.warnings[0];
  EXPECT_NE(defaults.warnings[0].find("web_search"), std::string::npos) << defaults.warnings[0];
  EXPECT_EQ(defaults.tools, with_defaults["tools"]);  // the response echoes what was sent
}

TEST(ResponsesParse, NamespaceFunctionsAreFlatFunctions) {
  const json fn = {{"type", "function"}, {"name", "_send"}, {"parameters", {{"type", "object"}}}};
  const json ns = {{"type", "namespace"}, {"name", "team__"}, {"tools", json::array({fn})}};
  // A call back in the conversation carries its namespace: it is shown under the same flat name.
  const json input = json::array({{{"role", "user"}, {"content", "go"}},
                                  {{"type", "function_call"},
                                   {"call_id", "c1"},
                                   {"name", "_send"},
                                   {"namespace", "team__"},
                                   {"arguments", "{}"}},
                                  {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "ok"}}});
  ResponsesParams p = parse_responses_params(json{{"input", input}, {"tools", {ns}}}, limits());
  ASSERT_EQ(p.chat.tools.size(), 1u);
  EXPECT_EQ(p.chat.tools[0]["function"]["name"], "team__send");  // Codex trims the joint's underscores
  EXPECT_EQ(p.namespaced.at("team__send"), (std::pair<std::string, std::string>{"team__", "_send"}));
  EXPECT_EQ(p.chat.messages[1]["tool_calls"][0]["function"]["name"], "team__send");
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_EQ(namespaced_tool_name("a", "b"), "a__b");
  // What a namespace holds is checked like any tool.
  json bad = ns;
  bad["tools"][0].erase("name");
  EXPECT_EQ(responses_error(json{{"input", "x"}, {"tools", {bad}}}).param, "tools[0].tools[0].name");
  EXPECT_EQ(responses_error(json{{"input", "x"}, {"tools", {{{"type", "namespace"}, {"name", "n"}}}}}).param,
            "tools[0].tools");
}

TEST(ResponsesParse, BuiltInToolsAreLeftOutWithAWarning) {
  const json builtins = json::array({{{"type", "web_search"}},
                                     {{"type", "file_search"}, {"vector_store_ids", {"v"}}},
                                     {{"type", "computer_use_preview"}},
                                     kWeatherTool,
                                     {{"type", "code_interpreter"}},
                                     {{"type", "mcp"}, {"server_label", "x"}}});
  ResponsesParams p = parse_responses_params(json{{"input", "x"}, {"tools", builtins}}, limits());
  ASSERT_EQ(p.chat.tools.size(), 1u);
  EXPECT_EQ(p.chat.tools[0]["function"]["name"], "get_weather");
  ASSERT_EQ(p.warnings.size(), 5u);
  EXPECT_EQ(p.warnings[2].rfind("tools[2]: ", 0), 0u) << p.warnings[2];
  EXPECT_NE(p.warnings[2].find("computer_use_preview"), std::string::npos);
  // The same prompt as without them: the model is asked nothing about tools it cannot call.
  ResponsesParams plain = parse_responses_params(json{{"input", "x"}, {"tools", {kWeatherTool}}}, limits());
  EXPECT_EQ(p.chat.tools, plain.chat.tools);
}

TEST(ResponsesParse, StringInputIsOneUserMessage) {
  ResponsesParams p = parse_responses_params(json{{"input", "Hello"}}, limits());
  EXPECT_EQ(p.chat.messages, (json::array({{{"role", "user"}, {"content", "Hello"}}})));
}

TEST(ResponsesParse, ReasoningEffortIsTheThinkingSwitch) {
  for (const char* off : {"none", "minimal"})
    EXPECT_EQ(
        parse_responses_params(json{{"input", "x"}, {"reasoning", {{"effort", off}}}}, limits()).chat.enable_thinking,
        std::optional<bool>(false));
  for (const char* on : {"low", "medium", "high", "xhigh"})
    EXPECT_EQ(
        parse_responses_params(json{{"input", "x"}, {"reasoning", {{"effort", on}}}}, limits()).chat.enable_thinking,
        std::optional<bool>(true));
  EXPECT_EQ(responses_error(json{{"input", "x"}, {"reasoning", {{"effort", "max"}}}}).param, "reasoning.effort");
}

TEST(ResponsesParse, TextFormatAndLogprobs) {
  json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}};
  ResponsesParams p = parse_responses_params(
      json{{"input", "x"},
           {"text", {{"format", {{"type", "json_schema"}, {"name", "A"}, {"schema", schema}, {"strict", true}}}}},
           {"include", {"message.output_text.logprobs"}},
           {"top_logprobs", 3}},
      limits());
  EXPECT_NE(p.chat.response_grammar, nullptr);
  EXPECT_TRUE(p.output_logprobs);
  EXPECT_TRUE(p.chat.logprobs);
  EXPECT_EQ(p.chat.top_logprobs, 3);
  EXPECT_EQ(p.text_format["name"], "A");
  EXPECT_NE(parse_responses_params(json{{"input", "x"}, {"text", {{"format", {{"type", "json_object"}}}}}}, limits())
                .chat.response_grammar,
            nullptr);
  EXPECT_EQ(parse_responses_params(json{{"input", "x"}, {"text", {{"format", {{"type", "text"}}}}}}, limits())
                .chat.response_grammar,
            nullptr);
}

TEST(ResponsesParse, StoredStateIsRefusedByName) {
  const json in = "x";
  struct Case {
    json body;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"input", in}, {"previous_response_id", "resp_1"}}, "previous_response_id"},
      {{{"input", in}, {"conversation", "conv_1"}}, "conversation"},
      {{{"input", in}, {"prompt", {{"id", "p"}}}}, "prompt"},
      {{{"input", in}, {"max_tool_calls", 2}}, "max_tool_calls"},
      {{{"input", in}, {"store", true}}, "store"},
      {{{"input", in}, {"background", true}}, "background"},
      {{{"input", in}, {"truncation", "auto"}}, "truncation"},
      {{{"input", in}, {"service_tier", "flex"}}, "service_tier"},
      {{{"input", in}, {"frobnicate", 1}}, "frobnicate"},
      {{{"input", in}, {"messages", json::array()}}, "messages"},
      {{{"input", in}, {"tool_choice", {{"type", "web_search_preview"}}}}, "tool_choice.type"},
      {{{"input", in}, {"include", {"file_search_call.results"}}}, "include[0]"},
      {{{"input", in}, {"text", {{"verbosity", "low"}}}}, "text.verbosity"},
      {{{"input", {{{"type", "item_reference"}, {"id", "msg_1"}}}}}, "input[0].type"},
      {{{"input", {{{"type", "web_search_call"}, {"id", "ws_1"}}}}}, "input[0].type"},
      {{{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}}},
       "input[0].content[0].type"},
      {{{"input", {{{"type", "reasoning"}, {"summary", json::array()}, {"encrypted_content", "gAAA"}}}}},
       "input[0].encrypted_content"},
  };
  for (const auto& c : cases) {
    ApiError e = responses_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body.dump();
    EXPECT_EQ(e.param, c.param) << c.body.dump() << " -> " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(ResponsesParse, BadItemsNameTheirPlace) {
  // A function's output without its call.
  json orphan = {{"input",
                  {{{"role", "user"}, {"content", "hi"}},
                   {{"type", "function_call_output"}, {"call_id", "call_9"}, {"output", "x"}}}}};
  ApiError e = responses_error(orphan);
  EXPECT_EQ(e.param, "input[1].call_id");
  EXPECT_NE(e.message.find("call_9"), std::string::npos);
  EXPECT_EQ(responses_error(json{{"input", {{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}}}}}).param,
            "input[0].arguments");
  EXPECT_EQ(responses_error(json{{"input", {{{"type", "message"}, {"role", "tool"}, {"content", "x"}}}}}).param,
            "input[0].role");
  EXPECT_EQ(responses_error(json{{"input", {{{"role", "user"}}}}}).param, "input[0].content");
  EXPECT_EQ(responses_error(json{{"input", {{{"role", "user"}, {"content", 5}}}}}).param, "input[0].content");
  EXPECT_EQ(responses_error(json{{"input", json::array()}}).param, "input");
  EXPECT_EQ(responses_error(json{{"input", 3}}).param, "input");
  EXPECT_EQ(responses_error(json::object()).param, "input");
  EXPECT_EQ(responses_error(json{{"input", {"just a string"}}}).param, "input[0]");
}

TEST(ResponsesParse, ChatParserErrorsUseResponsesNames) {
  EXPECT_EQ(responses_error(json{{"input", "x"}, {"max_output_tokens", 0}}).param, "max_output_tokens");
  ApiError e = responses_error(json{{"input", "x"}, {"max_output_tokens", "lots"}});
  EXPECT_EQ(e.param, "max_output_tokens");
  EXPECT_NE(e.message.find("max_output_tokens"), std::string::npos) << e.message;
  EXPECT_EQ(responses_error(json{{"input", "x"}, {"temperature", 3}}).param, "temperature");
  EXPECT_EQ(
      responses_error(
          json{{"input", "x"}, {"tools", {kWeatherTool}}, {"tool_choice", {{"type", "function"}, {"name", "nope"}}}})
          .param,
      "tool_choice.name");
  EXPECT_EQ(responses_error(json{{"input", "x"}, {"tool_choice", "sometimes"}}).param, "tool_choice");
  json bad_schema = {{"type", "string"}, {"pattern", "a+"}};
  e = responses_error(
      json{{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "n"}, {"schema", bad_schema}}}}}});
  EXPECT_EQ(e.param.rfind("text.format.schema", 0), 0u) << e.param;
  EXPECT_EQ(responses_error(json{{"input", "x"}, {"text", {{"format", {{"type", "yaml"}}}}}}).param,
            "text.format.type");
  json tool = kWeatherTool;
  tool["parameters"] = 5;
  EXPECT_EQ(responses_error(json{{"input", "x"}, {"tools", {tool}}}).param, "tools[0].parameters");
  // Assistant content that is not text, in an item after instructions: the item's own index.
  e = responses_error(
      json{{"instructions", "s"}, {"input", {{{"role", "user"}, {"content", {{{"type", "output_text"}}}}}}}});
  EXPECT_EQ(e.param, "input[0].content[0].text");
}

TEST(ResponsesParse, PromptTextIsBounded) {
  ParseLimits l = limits();
  l.max_prompt_tokens = 10;
  try {
    parse_responses_params(json{{"input", std::string(1000, 'a')}}, l);
    FAIL() << "no error";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error.status, 413);
    EXPECT_EQ(e.error.param, "input");
  }
  EXPECT_EQ(responses_error(json{{"input", "x"}, {"prompt_cache_key", std::string(2000, 'k')}}).code,
            "string_too_long");
}

}  // namespace
}  // namespace sb
