// Request parsing: every field's type and range, errors naming the field.
#include "server/protocols/request_parse.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/server/protocols/parse_errors.h"

namespace sb {
namespace {

using json = nlohmann::ordered_json;

ParseLimits limits() { return testing::parse_limits(50, 16); }

// The error a completion body raises, or a 0-status error when it parses.
ApiError completion_error(const json& body) {
  return testing::parse_error([&] { parse_completion_params(body, limits()); });
}

ApiError chat_error(const json& body) {
  return testing::parse_error([&] { parse_chat_params(body, limits()); });
}

TEST(RequestParse, CompletionWithTokenIdsAndEveryField) {
  json body = {{"model", "m"},       {"prompt", {1, 2, 3}}, {"max_tokens", 7},      {"temperature", 0.5},
               {"top_p", 0.9},       {"top_k", 40},          {"seed", 12345},        {"stop", {"\n\n", "END"}},
               {"logprobs", 5},      {"echo", true},         {"stream", true},       {"cache_salt", "s1"},
               {"frequency_penalty", 0.5}, {"presence_penalty", -1}, {"repetition_penalty", 1.1},
               {"min_p", 0.05}, {"logit_bias", {{"5", -100}, {"17", 2.5}}}, {"user", "u-1"}, {"best_of", 1},
               {"response_format", {{"type", "json_object"}}}};
  CompletionParams p = parse_completion_params(body, limits());
  EXPECT_EQ(p.model, "m");
  EXPECT_FALSE(p.prompt_is_text);
  EXPECT_EQ(p.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.9f);
  EXPECT_EQ(p.sampling.top_k, 40);
  EXPECT_EQ(p.sampling.seed, 12345u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(p.logprobs, 5);
  EXPECT_TRUE(p.echo);
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.has_cache_salt);
  EXPECT_EQ(p.cache_salt, "s1");
  EXPECT_TRUE(p.seed_given);
  EXPECT_FLOAT_EQ(p.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.presence_penalty, -1.0f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.05f);
  EXPECT_EQ(p.logit_bias, (std::vector<std::pair<int32_t, float>>{{5, -100.0f}, {17, 2.5f}}));
  EXPECT_NE(p.response_grammar, nullptr);
}

TEST(RequestParse, EveryFieldIsUsedOrRefusedByName) {
  const json msgs = {{{"role", "user"}, {"content", "a"}}};
  // Refused, naming the field.
  for (const char* f : {"functions", "function_call", "audio", "prediction", "web_search_options", "reasoning_effort",
                        "verbosity", "frobnicate"}) {
    ApiError e = chat_error(json{{"messages", msgs}, {f, 1}});
    EXPECT_EQ(e.status, 400) << f;
    EXPECT_EQ(e.param, f);
    EXPECT_NE(e.message.find(f), std::string::npos) << e.message;
  }
  EXPECT_EQ(chat_error(json{{"messages", msgs}, {"n", 2}}).param, "n");
  EXPECT_EQ(chat_error(json{{"messages", msgs}, {"store", true}}).param, "store");
  EXPECT_EQ(chat_error(json{{"messages", msgs}, {"service_tier", "priority"}}).param, "service_tier");
  EXPECT_EQ(chat_error(json{{"messages", msgs}, {"modalities", {"text", "audio"}}}).param, "modalities");
  EXPECT_EQ(chat_error(json{{"messages", msgs}, {"stream_options", {{"include_obfuscation", true}}}}).param,
            "stream_options.include_obfuscation");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"best_of", 3}}).param, "best_of");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"suffix", "tail"}}).param, "suffix");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"tools", json::array()}}).param, "tools");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"logit_bias", {{"1000", 1}}}}).param, "logit_bias.1000");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"logit_bias", {{"x", 1}}}}).param, "logit_bias.x");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"logit_bias", {{"3", 101}}}}).param, "logit_bias.3");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"presence_penalty", 2.5}}).param, "presence_penalty");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"repetition_penalty", 0}}).param, "repetition_penalty");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"min_p", 1.5}}).param, "min_p");
  // Accepted no-ops (docs/interface.md says why).
  ChatParams p = parse_chat_params(json{{"messages", msgs},
                                        {"user", "u"},
                                        {"metadata", {{"k", "v"}}},
                                        {"store", false},
                                        {"service_tier", "auto"},
                                        {"prompt_cache_key", "k"},
                                        {"safety_identifier", "s"},
                                        {"modalities", {"text"}},
                                        {"parallel_tool_calls", false},
                                        {"chat_template_kwargs", {{"enable_thinking", false}, {"persona", "x"}}}},
                                   limits());
  EXPECT_FALSE(p.parallel_tool_calls);
  EXPECT_EQ(p.enable_thinking, std::optional<bool>(false));
  EXPECT_EQ(p.template_kwargs, (json{{"persona", "x"}}));
  EXPECT_FALSE(p.seed_given);
}

TEST(RequestParse, ResponseFormatSchemasCompileOrNameWhatIsRefused) {
  const json msgs = {{{"role", "user"}, {"content", "a"}}};
  auto with_schema = [&](const json& schema) {
    return json{{"messages", msgs},
                {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "r"}, {"schema", schema}, {"strict", true}}}}}};
  };
  json ok = {{"type", "object"},
             {"properties",
              {{"name", {{"type", "string"}, {"minLength", 1}}},
               {"tags", {{"type", "array"}, {"items", {{"enum", {"a", "b"}}}}, {"maxItems", 3}}},
               {"n", {{"anyOf", {{{"type", "integer"}}, {{"type", "null"}}}}}}}},
             {"required", {"name"}},
             {"additionalProperties", false}};
  EXPECT_NE(parse_chat_params(with_schema(ok), limits()).response_grammar, nullptr);
  struct Case {
    json schema;
    std::string param;
  } cases[] = {
      {{{"type", "string"}, {"pattern", "^a"}}, "response_format.json_schema.schema.pattern"},
      {{{"type", "object"}, {"properties", {{"age", {{"type", "integer"}, {"minimum", 18}}}}}},
       "response_format.json_schema.schema.properties.age.minimum"},
      {{{"oneOf", {{{"type", "string"}}}}}, "response_format.json_schema.schema.oneOf"},
      {{{"type", "string"}, {"format", "email"}}, "response_format.json_schema.schema.format"},
      {{{"$ref", "#/$defs/missing"}}, "response_format.json_schema.schema.$ref"},
      {{{"type", "array"}, {"items", {{{"type", "string"}}}}}, "response_format.json_schema.schema.items"},
  };
  for (const auto& c : cases) {
    ApiError e = chat_error(with_schema(c.schema));
    EXPECT_EQ(e.status, 400) << c.schema.dump();
    EXPECT_EQ(e.param, c.param) << e.message;
  }
  EXPECT_EQ(chat_error(json{{"messages", msgs}, {"response_format", {{"type", "yaml"}}}}).param, "response_format.type");
  EXPECT_EQ(chat_error(json{{"messages", msgs}, {"response_format", {{"type", "json_schema"}}}}).param,
            "response_format.json_schema");
  // tool_choice "required" needs tools, and cannot be combined with a response format.
  EXPECT_EQ(chat_error(json{{"messages", msgs}, {"tool_choice", "required"}}).param, "tool_choice");
  json tools = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}};
  EXPECT_EQ(chat_error(json{{"messages", msgs}, {"tools", tools}, {"tool_choice", "required"},
                            {"response_format", {{"type", "json_object"}}}})
                .param,
            "response_format");
}

TEST(RequestParse, CompletionDefaultsAndTextPrompt) {
  CompletionParams p = parse_completion_params(json{{"prompt", "hello"}}, limits());
  EXPECT_TRUE(p.prompt_is_text);
  EXPECT_EQ(p.prompt_text, "hello");
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.sampling.temperature, 0.0f);
  EXPECT_EQ(p.logprobs, -1);
  EXPECT_FALSE(p.has_cache_salt);
  // A batch of one is the same prompt; "stop" as one string; nulls are absent.
  CompletionParams q = parse_completion_params(json{{"prompt", {{5, 6}}}, {"stop", "x"}, {"max_tokens", nullptr}}, limits());
  EXPECT_EQ(q.prompt_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(q.stop, (std::vector<std::string>{"x"}));
  EXPECT_EQ(q.max_tokens, 16);
}

TEST(RequestParse, WrongTypesNameTheField) {
  struct Case {
    json body;
    std::string param;
  };
  const Case cases[] = {
      {{{"prompt", 5}}, "prompt"},
      {{{"prompt", "a"}, {"max_tokens", "10"}}, "max_tokens"},
      {{{"prompt", "a"}, {"max_tokens", 1.5}}, "max_tokens"},
      {{{"prompt", "a"}, {"temperature", "hot"}}, "temperature"},
      {{{"prompt", "a"}, {"top_p", true}}, "top_p"},
      {{{"prompt", "a"}, {"top_k", 2.5}}, "top_k"},
      {{{"prompt", "a"}, {"seed", "1"}}, "seed"},
      {{{"prompt", "a"}, {"stop", 3}}, "stop"},
      {{{"prompt", "a"}, {"stop", {"ok", 3}}}, "stop[1]"},
      {{{"prompt", "a"}, {"logprobs", "5"}}, "logprobs"},
      {{{"prompt", "a"}, {"echo", 1}}, "echo"},
      {{{"prompt", "a"}, {"stream", "yes"}}, "stream"},
      {{{"prompt", "a"}, {"cache_salt", 7}}, "cache_salt"},
      {{{"prompt", "a"}, {"model", 7}}, "model"},
      {{{"prompt", {1, "two"}}}, "prompt[1]"},
      {{{"prompt", {1, 2.5}}}, "prompt[1]"},
      {{{"prompt", "a"}, {"stream_options", {{"include_usage", "y"}}}}, "stream_options.include_usage"},
  };
  for (const auto& c : cases) {
    ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body.dump();
    EXPECT_EQ(e.param, c.param) << c.body.dump();
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_NE(e.message.find(c.param.substr(0, c.param.find('['))), std::string::npos) << e.message;
  }
}

TEST(RequestParse, RangesNegativeAndHugeNumbers) {
  struct Case {
    json body;
    std::string param;
  };
  const Case cases[] = {
      {{{"prompt", "a"}, {"max_tokens", 0}}, "max_tokens"},
      {{{"prompt", "a"}, {"max_tokens", -3}}, "max_tokens"},
      {{{"prompt", "a"}, {"max_tokens", 1e16}}, "max_tokens"},  // above 2^53
      {{{"prompt", "a"}, {"max_tokens", 1e300}}, "max_tokens"},
      {{{"prompt", "a"}, {"seed", 9223372036854775808.0}}, "seed"},
      {{{"prompt", "a"}, {"max_tokens", 18446744073709551615ULL}}, "max_tokens"},
      {{{"prompt", "a"}, {"temperature", -0.1}}, "temperature"},
      {{{"prompt", "a"}, {"temperature", 1e9}}, "temperature"},
      {{{"prompt", "a"}, {"top_p", 0}}, "top_p"},
      {{{"prompt", "a"}, {"top_p", 1.5}}, "top_p"},
      {{{"prompt", "a"}, {"top_k", -2}}, "top_k"},
      {{{"prompt", "a"}, {"logprobs", 21}}, "logprobs"},
      {{{"prompt", "a"}, {"logprobs", -1}}, "logprobs"},
      {{{"prompt", "a"}, {"n", 2}}, "n"},
      {{{"prompt", ""}}, "prompt"},
      {{{"prompt", json::array()}}, "prompt"},
      {{{"prompt", {"a", "b"}}}, "prompt"},
      {json::object(), "prompt"},
  };
  for (const auto& c : cases) {
    ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body.dump();
    EXPECT_EQ(e.param, c.param) << c.body.dump();
  }
  // A body's 0 parses as an unsigned number: below the range all the same.
  EXPECT_EQ(completion_error(json::parse(R"({"prompt": "a", "max_tokens": 0})")).param, "max_tokens");
  EXPECT_EQ(chat_error(json::parse(R"({"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": 0})"))
                .param,
            "max_completion_tokens");
  // Integral floats are integers; the extremes of the ranges are accepted.
  CompletionParams p = parse_completion_params(json{{"prompt", "a"}, {"max_tokens", 4096.0}, {"temperature", 2}}, limits());
  EXPECT_EQ(p.max_tokens, 4096);
  EXPECT_EQ(p.sampling.temperature, 2.0f);
  // Above --max-tokens-limit is not a parse error: the route lowers it to the limit.
  EXPECT_EQ(parse_completion_params(json{{"prompt", "a"}, {"max_tokens", 64000}}, limits()).max_tokens, 64000);
  EXPECT_EQ(parse_completion_params(json{{"prompt", "a"}, {"seed", -1}}, limits()).sampling.seed, ~uint64_t{0});
}

TEST(RequestParse, TokenIdsOutsideTheVocabulary) {
  for (json bad : {json(-1), json(1000), json(4294967296LL), json(18446744073709551615ULL)}) {
    ApiError e = completion_error(json{{"prompt", {1, 2, bad}}});
    EXPECT_EQ(e.status, 400) << bad.dump();
    EXPECT_EQ(e.param, "prompt[2]");
    EXPECT_EQ(e.code, "invalid_token_id");
  }
  EXPECT_EQ(parse_completion_params(json{{"prompt", {0, 999}}}, limits()).prompt_ids, (std::vector<int32_t>{0, 999}));
}

TEST(RequestParse, PromptLongerThanTheLimitIs413) {
  json ids = json::array();
  for (int i = 0; i < 51; ++i) ids.push_back(i);
  ApiError e = completion_error(json{{"prompt", ids}});
  EXPECT_EQ(e.status, 413);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.code, "context_length_exceeded");
  ids.erase(ids.size() - 1);
  EXPECT_EQ(parse_completion_params(json{{"prompt", ids}}, limits()).prompt_ids.size(), 50u);
}

TEST(RequestParse, ChatMessagesToolsAndChoices) {
  json body = {
      {"messages",
       {{{"role", "system"}, {"content", "be brief"}},
        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi "}}, {{"type", "text"}, {"text", "there"}}}}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{\"a\":1}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "42"}}}},
      {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}}},
      {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}},
      {"max_completion_tokens", 9},
      {"logprobs", true},
      {"top_logprobs", 3}};
  ChatParams p = parse_chat_params(body, limits());
  ASSERT_EQ(p.messages.size(), 4u);
  EXPECT_EQ(p.messages[1]["content"], "hi there");
  EXPECT_EQ(p.messages[2]["content"], "");
  EXPECT_EQ(p.messages[2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(p.messages[3]["tool_call_id"], "call_1");
  // Arguments sent as an object stay the object, in its key order (issue 47:
  // they were printed here and parsed again at the render).
  json with_object = body;
  with_object["messages"][2]["tool_calls"][0]["function"]["arguments"] = {{"z", 1}, {"a", {{"b", 2}}}};
  const ChatParams q = parse_chat_params(with_object, limits());
  const json& args = q.messages[2]["tool_calls"][0]["function"]["arguments"];
  ASSERT_TRUE(args.is_object()) << args.dump();
  EXPECT_EQ(args.dump(), R"({"z":1,"a":{"b":2}})");
  EXPECT_EQ(p.tools.size(), 1u);
  EXPECT_EQ(p.tool_choice, "f");
  EXPECT_EQ(p.max_tokens, 9);
  EXPECT_TRUE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 3);
}

TEST(RequestParse, ChatErrorsNameTheField) {
  struct Case {
    json body;
    std::string param;
  };
  const Case cases[] = {
      {json::object(), "messages"},
      {{{"messages", "hi"}}, "messages"},
      {{{"messages", json::array()}}, "messages"},
      {{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", 5}}}}}, "messages[1].content"},
      {{{"messages", {{{"role", "user"}}}}}, "messages[0].content"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}, "messages[0].content[0].type"},
      {{{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"name", 3}}}}}}}}}},
       "messages[0].tool_calls[0].function.name"},
      {{{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"tools", {{{"type", "function"}}}}}, "tools[0].function"},
      {{{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}},
       "tool_choice.function.name"},
      {{{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"max_completion_tokens", -1}}, "max_completion_tokens"},
      {{{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"logprobs", 1}}, "logprobs"},
      {{{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"top_logprobs", 3}}, "top_logprobs"},
      {{{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"top_logprobs", 30}, {"logprobs", true}}, "top_logprobs"},
  };
  for (const auto& c : cases) {
    ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body.dump();
    EXPECT_EQ(e.param, c.param) << c.body.dump();
  }
}

TEST(RequestParse, BodySyntaxAndDepth) {
  auto body_error = [](const std::string& text) { return testing::parse_error([&] { parse_body(text, limits()); }); };
  EXPECT_EQ(body_error("{\"prompt\": ").code, "invalid_json");
  EXPECT_EQ(body_error("not json").code, "invalid_json");
  EXPECT_EQ(body_error("[1,2]").code, "invalid_json");  // not an object
  // A number beyond a double (found by request_fuzz: it escaped as nlohmann's
  // out_of_range instead of a 400).
  EXPECT_EQ(body_error("{\"prompt\": 6e666666, \"x\": [").code, "invalid_json");
  std::string deep = std::string(17, '[') + std::string(17, ']');
  EXPECT_EQ(json_nesting_depth(deep), 17);
  EXPECT_EQ(body_error("{\"a\":" + deep + "}").code, "json_too_deep");
  // Brackets inside strings, escaped quotes included, are not nesting.
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[\"[[[[[[[[[[[[[[[[[[[[[["})"), 1);
  EXPECT_EQ(body_error("{\"a\":" + std::string(15, '[') + std::string(15, ']') + "}").status, 0);
  EXPECT_EQ(body_error("{\"a\": \"\\ud800\"}").status, 400);  // a lone surrogate is invalid JSON
}

// Issue 34: every string field that is not prompt text is bounded, one by
// one, with a 400 naming it; prompt text is bounded in bytes before it is
// tokenised (kPromptBytesPerToken per token of the limit).
TEST(RequestParse, StringFieldsAreBoundedAndNamed) {
  const std::string long_field(kMaxFieldBytes + 1, 'x');
  const std::string fits(kMaxFieldBytes, 'x');
  auto expect_too_long = [](const ApiError& e, const std::string& param) {
    EXPECT_EQ(e.status, 400) << param;
    EXPECT_EQ(e.param, param);
    EXPECT_EQ(e.code, "string_too_long") << param;
    EXPECT_LT(e.message.size(), 256u) << "the error echoes the value";
  };
  expect_too_long(completion_error({{"prompt", "x"}, {"cache_salt", long_field}}), "cache_salt");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"cache_salt", fits}}).status, 0);
  expect_too_long(completion_error({{"prompt", "x"}, {"stop", long_field}}), "stop");
  expect_too_long(completion_error({{"prompt", "x"}, {"stop", {"a", long_field}}}), "stop[1]");
  expect_too_long(completion_error({{"prompt", "x"}, {"model", long_field}}), "model");
  expect_too_long(completion_error({{"prompt", "x"}, {"user", long_field}}), "user");
  const json user = {{"role", "user"}, {"content", "hi"}};
  expect_too_long(chat_error({{"messages", {{{"role", long_field}, {"content", "hi"}}}}}), "messages[0].role");
  expect_too_long(chat_error({{"messages", {{{"role", "user"}, {"content", "hi"}, {"name", long_field}}}}}),
                  "messages[0].name");
  expect_too_long(chat_error({{"messages", {user}}, {"tools", {{{"type", "function"}, {"function", {{"name", long_field}}}}}}}),
                  "tools[0].function.name");
  expect_too_long(chat_error({{"messages", {user}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", long_field}}}}}}),
                  "tool_choice.function.name");
  const json call = {{"id", long_field}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}};
  expect_too_long(chat_error({{"messages", {user, {{"role", "assistant"}, {"tool_calls", {call}}}}}}),
                  "messages[1].tool_calls[0].id");
  // An unknown field's name is cut short in the error.
  const ApiError unknown = completion_error({{"prompt", "x"}, {std::string(100000, 'k'), 1}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_LT(unknown.message.size(), 256u);
  EXPECT_LT(unknown.param.size(), 100u);
}

TEST(RequestParse, PromptTextIsBoundedInBytesBeforeTokenising) {
  ASSERT_EQ(prompt_bytes_limit(limits()), 50 * kPromptBytesPerToken);
  const std::string at_bound(50 * kPromptBytesPerToken, 'a');
  EXPECT_EQ(completion_error({{"prompt", at_bound}}).status, 0);
  const ApiError e = completion_error({{"prompt", at_bound + "a"}});
  EXPECT_EQ(e.status, 413);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.code, "context_length_exceeded");
  // Chat: the messages (with tools and template kwargs) as JSON.
  const ApiError c = chat_error({{"messages", {{{"role", "user"}, {"content", at_bound}}}}});
  EXPECT_EQ(c.status, 413);
  EXPECT_EQ(c.param, "messages");
  // No prompt limit, no byte bound.
  ParseLimits open = limits();
  open.max_prompt_tokens = 0;
  EXPECT_EQ(prompt_bytes_limit(open), 0u);
  EXPECT_NO_THROW(parse_completion_params(json{{"prompt", at_bound + at_bound}}, open));
}

TEST(RequestParse, CacheModeHeader) {
  EXPECT_EQ(parse_cache_mode(""), CacheMode::kDefault);
  EXPECT_EQ(parse_cache_mode("default"), CacheMode::kDefault);
  EXPECT_EQ(parse_cache_mode("bypass"), CacheMode::kBypass);
  EXPECT_EQ(parse_cache_mode("read-only"), CacheMode::kReadOnly);
  try {
    parse_cache_mode("sometimes");
    FAIL() << "accepted a bad X-Cache-Mode";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error.param, "X-Cache-Mode");
  }
}

}  // namespace
}  // namespace sb

namespace sb {
namespace {

// Issue 38: `speculative: {mode, draft_max}` on completions and chat; a bad
// value is a 400 naming it.
TEST(RequestParse, SpeculativeSettings) {
  CompletionParams p = parse_completion_params(
      json{{"prompt", {1, 2}}, {"speculative", {{"mode", "ngram"}, {"draft_max", 6}}}}, limits());
  ASSERT_TRUE(p.speculative.mode.has_value());
  EXPECT_EQ(*p.speculative.mode, SpeculativeMode::kNgram);
  EXPECT_EQ(p.speculative.draft_max, 6);
  EXPECT_FALSE(parse_completion_params(json{{"prompt", {1}}}, limits()).speculative.mode.has_value());
  const json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  ChatParams c = parse_chat_params(json{{"messages", msgs}, {"speculative", {{"mode", "off"}}}}, limits());
  EXPECT_EQ(*c.speculative.mode, SpeculativeMode::kOff);
  EXPECT_FALSE(c.speculative.draft_max.has_value());
  struct Case {
    json speculative;
    std::string param;
  } cases[] = {{"ngram", "speculative"},
               {{{"mode", "eagle"}}, "speculative.mode"},
               {{{"mode", 3}}, "speculative.mode"},
               {{{"mode", "mtp"}}, "speculative.mode"},
               {{{"draft_max", 0}}, "speculative.draft_max"},
               {{{"draft_max", kMaxDraftTokens + 1}}, "speculative.draft_max"},
               {{{"draft_max", "4"}}, "speculative.draft_max"},
               {{{"depth", 2}}, "speculative.depth"}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.speculative.dump());
    const ApiError e = completion_error(json{{"prompt", {1}}, {"speculative", k.speculative}});
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, k.param);
    EXPECT_EQ(chat_error(json{{"messages", msgs}, {"speculative", k.speculative}}).param, k.param);
  }
  // mtp is refused above because the limits say the checkpoint has no MTP head.
  ParseLimits with_head = limits();
  with_head.has_mtp = true;
  const CompletionParams m =
      parse_completion_params(json{{"prompt", {1}}, {"speculative", {{"mode", "mtp"}}}}, with_head);
  EXPECT_EQ(m.speculative.mode, SpeculativeMode::kMtp);
}

}  // namespace
}  // namespace sb
