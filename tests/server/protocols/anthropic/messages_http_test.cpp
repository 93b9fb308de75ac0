// /v1/messages over the fake backend, whose scripted replies think and call
// tools (the random-weight demo model seldom does): the Anthropic event
// sequence of each block kind, the stop reasons, the cap, keys, aliases and
// the error shape.
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "tests/server/test_server.h"

namespace sb::testing {
namespace {

using nlohmann::json;

httplib::Result post(httplib::Client& c, const json& body, httplib::Headers headers = {}) {
  return c.Post("/v1/messages", headers, body.dump(), "application/json");
}

json ask(const std::string& text, int max_tokens = 100) {
  return {{"model", "fake-model"}, {"max_tokens", max_tokens}, {"messages", {{{"role", "user"}, {"content", text}}}}};
}

const json kTools = json::parse(R"([{"name": "get_weather", "input_schema": {"type": "object"}}])");

struct Event {
  std::string name;
  json data;
};

// The named events of an Anthropic stream, in order.
std::vector<Event> events_of(const std::string& body) {
  std::vector<Event> out;
  size_t pos = 0;
  while ((pos = body.find("event: ", pos)) != std::string::npos) {
    const size_t eol = body.find('\n', pos), data = body.find("data: ", eol), end = body.find("\n\n", data);
    out.push_back({body.substr(pos + 7, eol - pos - 7), json::parse(body.substr(data + 6, end - data - 6))});
    pos = end;
  }
  return out;
}

std::vector<std::string> names_of(const std::vector<Event>& events) {
  std::vector<std::string> names;
  for (const auto& e : events) names.push_back(e.name);
  return names;
}

TEST(MessagesHttp, ThinkingThenTextAsBlocksWholeAndStreamedAndAStopSequence) {
  TestServer ts;
  auto c = ts.client();
  auto r = post(*c, ask("THINK about it"));
  ASSERT_EQ(r->status, 200) << r->body;
  const json m = json::parse(r->body);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["content"], json::parse(R"([{"type": "thinking", "thinking": "let me see", "signature": ""},
                                          {"type": "text", "text": "It is 42."}])"));
  EXPECT_EQ(m["stop_reason"], "end_turn");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  json streamed = ask("THINK about it");
  streamed["stream"] = true;
  r = post(*c, streamed);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto events = events_of(r->body);
  const std::vector<std::string> names = names_of(events);
  ASSERT_GE(names.size(), 9u);
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names[1], "ping");
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_EQ(names.back(), "message_stop");
  std::string thinking, text;
  std::vector<std::string> blocks;
  for (const auto& e : events) {
    if (e.name == "content_block_start") blocks.push_back(e.data["content_block"]["type"]);
    if (e.name != "content_block_delta") continue;
    EXPECT_EQ(e.data["index"], static_cast<int>(blocks.size()) - 1);
    if (e.data["delta"]["type"] == "thinking_delta") thinking += e.data["delta"]["thinking"].get<std::string>();
    if (e.data["delta"]["type"] == "text_delta") text += e.data["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(blocks, (std::vector<std::string>{"thinking", "text"}));
  EXPECT_EQ(thinking, "let me see");
  EXPECT_EQ(text, "It is 42.");
  EXPECT_EQ(events[events.size() - 2].data["delta"]["stop_reason"], "end_turn");
  // The second request found the first one's prefix in the (fake) bank: the same prompt, split otherwise.
  const json& usage = events[events.size() - 2].data["usage"];
  EXPECT_EQ(usage["output_tokens"], m["usage"]["output_tokens"]);
  const auto total = [](const json& u) {
    return u["input_tokens"].get<int>() + u["cache_read_input_tokens"].get<int>() +
           u["cache_creation_input_tokens"].get<int>();
  };
  EXPECT_EQ(total(usage), total(m["usage"]));
  EXPECT_GT(usage["cache_read_input_tokens"].get<int>(), 0);
  json stopped = ask("THINK about it");
  stopped["stop_sequences"] = {"42"};
  const json cut = json::parse(post(*c, stopped)->body);
  EXPECT_EQ(cut["stop_reason"], "stop_sequence");
  EXPECT_EQ(cut["stop_sequence"], "42");
  EXPECT_EQ(cut["content"][1]["text"], "It is ");
}

TEST(MessagesHttp, ToolUseBlockWholeAndAsInputJsonDelta) {
  TestServer ts;
  auto c = ts.client();
  json body = ask("CALL_TOOL please");
  body["tools"] = kTools;
  auto r = post(*c, body);
  ASSERT_EQ(r->status, 200) << r->body;
  const json m = json::parse(r->body);
  ASSERT_EQ(m["content"].size(), 1u) << r->body;
  EXPECT_EQ(m["content"][0]["type"], "tool_use");
  EXPECT_EQ(m["content"][0]["name"], "get_weather");
  EXPECT_EQ(m["content"][0]["input"], json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  body["stream"] = true;
  r = post(*c, body);
  const auto events = events_of(r->body);
  std::string partial;
  for (const auto& e : events) {
    if (e.name == "content_block_start") {
      EXPECT_EQ(e.data["content_block"]["type"], "tool_use");
      EXPECT_EQ(e.data["content_block"]["id"], m["content"][0]["id"]);
      EXPECT_EQ(e.data["content_block"]["input"], json::object());
    }
    if (e.name == "content_block_delta" && e.data["delta"]["type"] == "input_json_delta")
      partial += e.data["delta"]["partial_json"].get<std::string>();
  }
  EXPECT_EQ(json::parse(partial), m["content"][0]["input"]);
  EXPECT_EQ(events[events.size() - 2].data["delta"]["stop_reason"], "tool_use");
}

TEST(MessagesHttp, MaxTokensAndTheCap) {
  ServerOptions o;
  o.max_tokens_cap = 5;
  TestServer ts(o);
  auto c = ts.client();
  // A scripted reply longer than the cap: an unseeded one may end on its own before it.
  // The request's own max_tokens: max_tokens; the operator's cap below it: the turn ends.
  json m = json::parse(post(*c, ask("THINK", 3))->body);
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_EQ(m["usage"]["output_tokens"], 3);
  EXPECT_FALSE(m.contains("capped_at"));
  m = json::parse(post(*c, ask("THINK", 1000))->body);
  EXPECT_EQ(m["stop_reason"], "end_turn");
  EXPECT_EQ(m["usage"]["output_tokens"], 5);
  EXPECT_EQ(m["capped_at"], 5);
}

// One meaning of a reply the server's limit cut, on every route: a normal end
// (stop, end_turn, completed) with `capped_at`; the request's own limit is
// the route's length end. Streamed, the closing event says the same.
TEST(MessagesHttp, AReplyTheServersLimitCutsEndsNormallyOnEveryRoute) {
  ServerOptions o;
  o.max_tokens_cap = 5;
  TestServer ts(o);
  auto c = ts.client();
  const json user = {{{"role", "user"}, {"content", "THINK"}}};
  struct Route {
    const char* path;
    json body;                 // without its limit
    const char* limit;         // the limit's field
    const char* capped_end;    // the end a cap cut shows
    const char* own_end;       // the end the request's own limit shows
  };
  const std::vector<Route> routes = {
      {"/v1/chat/completions", {{"messages", user}}, "max_tokens", "stop", "length"},
      {"/v1/chat/completions", {{"messages", user}}, "max_completion_tokens", "stop", "length"},
      {"/v1/completions", {{"prompt", "THINK THINK THINK"}, {"seed", 3}}, "max_tokens", "stop", "length"},
      {"/v1/responses", {{"input", "THINK"}}, "max_output_tokens", "completed", "incomplete"},
      {"/v1/messages", {{"model", "fake-model"}, {"messages", user}}, "max_tokens", "end_turn", "max_tokens"}};
  const auto end_of = [](const std::string& path, const json& r) -> json {
    if (path == "/v1/responses") return r["status"];
    if (path == "/v1/messages") return r["stop_reason"];
    return r["choices"][0]["finish_reason"];
  };
  for (const Route& route : routes) {
    SCOPED_TRACE(std::string(route.path) + " " + route.limit);
    json body = route.body;
    body[route.limit] = 1000;
    auto r = c->Post(route.path, body.dump(), "application/json");
    ASSERT_EQ(r->status, 200) << r->body;
    json whole = json::parse(r->body);
    EXPECT_EQ(end_of(route.path, whole), route.capped_end) << r->body;
    EXPECT_EQ(whole["capped_at"], 5) << r->body;
    body[route.limit] = 3;
    whole = json::parse(c->Post(route.path, body.dump(), "application/json")->body);
    EXPECT_EQ(end_of(route.path, whole), route.own_end) << whole.dump();
    EXPECT_FALSE(whole.contains("capped_at"));
    // Streamed: the closing event carries the same end and capped_at.
    body[route.limit] = 1000;
    body["stream"] = true;
    const std::string stream = c->Post(route.path, body.dump(), "application/json")->body;
    const std::string capped = "\"capped_at\":5";
    EXPECT_NE(stream.find(capped), std::string::npos) << stream.substr(stream.size() > 600 ? stream.size() - 600 : 0);
    EXPECT_NE(stream.find(std::string("\"") + route.capped_end + "\""), std::string::npos);
  }
}

// A max_tokens above --max-tokens-limit is lowered to it and said so, not
// refused: a client that takes a cut for its own limit and retries with a
// larger one (Qwen Code asks for 64000) gets its answer, not a 400.
TEST(MessagesHttp, MaxTokensAboveTheLimitIsLoweredToIt) {
  ServerOptions o;
  o.limits.max_tokens_limit = 6;
  TestServer ts(o);
  auto c = ts.client();
  auto chat = c->Post("/v1/chat/completions",
                      json{{"messages", {{{"role", "user"}, {"content", "THINK"}}}}, {"max_tokens", 64000}}.dump(),
                      "application/json");
  ASSERT_EQ(chat->status, 200) << chat->body;
  const json r = json::parse(chat->body);
  EXPECT_EQ(r["capped_at"], 6);
  EXPECT_EQ(r["usage"]["completion_tokens"], 6);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  json m = json::parse(post(*c, ask("THINK", 64000))->body);
  EXPECT_EQ(m["stop_reason"], "end_turn");
  EXPECT_EQ(m["capped_at"], 6);
  // Still refused: no number, or none at all (JavaScript's exact integers end at 2^53).
  EXPECT_EQ(post(*c, ask("THINK", 0))->status, 400);
  json huge = ask("THINK");
  huge["max_tokens"] = 1e300;
  EXPECT_EQ(post(*c, huge)->status, 400);
}

TEST(MessagesHttp, KeysAliasesAndAnthropicErrors) {
  ServerOptions o;
  o.keys = ApiKeys::single("key-1");
  o.served_model_names = {"claude-alias", "fake-model", "claude-alias"};
  TestServer ts(o);
  auto c = ts.client();
  json body = ask("Hello", 4);
  body["model"] = "claude-alias";
  auto r = post(*c, body, {{"x-api-key", "key-1"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["model"], "claude-alias");
  EXPECT_EQ(post(*c, body, {{"Authorization", "Bearer key-1"}})->status, 200);
  const auto expect_error = [](const httplib::Result& res, int status, const std::string& type) {
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << res->body;
    const json e = json::parse(res->body);
    EXPECT_EQ(e["type"], "error") << res->body;
    EXPECT_EQ(e["error"]["type"], type) << res->body;
    EXPECT_FALSE(e["error"]["message"].get<std::string>().empty());
  };
  expect_error(post(*c, body), 401, "authentication_error");
  expect_error(post(*c, body, {{"x-api-key", "nope"}}), 401, "authentication_error");
  body["model"] = "claude-other";
  expect_error(post(*c, body, {{"x-api-key", "key-1"}}), 404, "not_found_error");
  body["model"] = "claude-alias";
  body["max_tokens"] = "lots";
  expect_error(post(*c, body, {{"x-api-key", "key-1"}}), 400, "invalid_request_error");
  // The alias is a model on the other routes too; each name is listed once
  // (the options name the model itself and the alias twice), with the context length.
  auto models = c->Get("/v1/models", {{"x-api-key", "key-1"}});
  const json listed = json::parse(models->body)["data"];
  ASSERT_EQ(listed.size(), 2u) << models->body;
  EXPECT_EQ(listed[0]["id"], "fake-model");
  EXPECT_EQ(listed[1]["id"], "claude-alias");
  EXPECT_GT(listed[1]["context_length"].get<int64_t>(), 0) << models->body;
  EXPECT_EQ(listed[1]["max_model_len"], listed[1]["context_length"]);
  EXPECT_EQ(c->Get("/v1/models/claude-alias", {{"x-api-key", "key-1"}})->status, 200);
  auto count = c->Post("/v1/messages/count_tokens", {{"x-api-key", "key-1"}},
                       json{{"model", "claude-alias"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}}.dump(),
                       "application/json");
  ASSERT_EQ(count->status, 200) << count->body;
  EXPECT_GT(json::parse(count->body)["input_tokens"].get<int>(), 2);
}

}  // namespace
}  // namespace sb::testing
