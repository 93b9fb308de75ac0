// The HTTP layer over a fake backend: response shapes, streaming, limits and
// bad input, authentication, cancellation on disconnect, queueing, shutdown.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <thread>

#include "server/protocols/generation.h"
#include "tests/server/test_server.h"

namespace sb::testing {
namespace {

using nlohmann::json;

httplib::Result post(httplib::Client& c, const std::string& path, const json& body, httplib::Headers headers = {}) {
  return c.Post(path.c_str(), headers, body.dump(), "application/json");
}

// The "data:" payloads of an SSE body, [DONE] included.
std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

void expect_openai_error(const httplib::Result& r, int status, const std::string& param) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r->body;
  ASSERT_TRUE(j.contains("error")) << r->body;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r->body;
  EXPECT_TRUE(e["type"].is_string()) << r->body;
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << r->body;
  if (param.empty())
    EXPECT_TRUE(e["param"].is_null()) << r->body;
  else
    EXPECT_EQ(e["param"], param) << r->body;
}

// Streams a 1000-token completion, runs `on_first_event` when its first
// bytes arrive, then hangs up: the request is cancelled, not finished.
void stream_then_hang_up(int port, const std::function<void()>& on_first_event) {
  httplib::Client c("127.0.0.1", port);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = json{{"prompt", "go"}, {"max_tokens", 1000}, {"seed", 0}, {"stream", true}}.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    on_first_event();
    return false;
  };
  c.send(req);
}

void expect_serving(httplib::Client& c) {
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto r = post(c, "/v1/completions", {{"prompt", {72, 105}}, {"max_tokens", 3}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(ServerHttp, HealthModelsAndCompletionShape) {
  TestServer ts;
  auto c = ts.client();
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = c->Get("/v1/models");
  ASSERT_TRUE(m);
  json models = json::parse(m->body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "fake-model");

  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back('a' + i % 26);
  auto r = post(*c, "/v1/completions",
                {{"model", "fake-model"}, {"prompt", prompt}, {"max_tokens", 8}, {"logprobs", 2}, {"seed", 7}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_TRUE(j["id"].get<std::string>().rfind("cmpl-", 0) == 0);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 40);
  for (const char* f :
       {"mode", "restore_point", "matched_tokens", "common_prefix_tokens", "snapshot_position", "blocks", "bytes_read",
        "checks", "check_failures", "prefill_tokens", "lookup_ms", "restore_ms", "prefill_ms"})
    EXPECT_TRUE(j["restore"].contains(f)) << f;
  EXPECT_EQ(j["restore"]["mode"], "cold");
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], j["restore"]["restore_point"]);
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);

  // The same prompt again comes from the (fake) bank; bypass does not.
  auto again = post(*c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"logprobs", 2}, {"seed", 7}});
  json j2 = json::parse(again->body);
  EXPECT_EQ(j2["restore"]["mode"], "ram");
  EXPECT_EQ(j2["usage"]["prompt_tokens_details"]["cached_tokens"], 32);
  auto bypass = post(*c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"logprobs", 2}, {"seed", 7}},
                     {{"X-Cache-Mode", "bypass"}});
  json j3 = json::parse(bypass->body);
  EXPECT_EQ(j3["restore"]["mode"], "bypass");
  EXPECT_EQ(j3["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(j2["choices"], j3["choices"]);
  EXPECT_EQ(j["choices"], j3["choices"]);
  // Another namespace (cache_salt) shares nothing.
  auto salted = post(*c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"cache_salt", "tenant-b"}});
  EXPECT_EQ(json::parse(salted->body)["restore"]["mode"], "cold");
}

TEST(ServerHttp, LogprobsRoundTripTheEnginesFloats) {
  TestServer ts;
  auto c = ts.client();
  auto r = post(*c, "/v1/completions",
                {{"prompt", {1, 2, 3, 4}}, {"max_tokens", 20}, {"logprobs", 3}, {"echo", true}, {"seed", 0}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  // Recompute the fake engine's floats directly and compare bit for bit.
  CompletionRequest req;
  req.prompt = {1, 2, 3, 4};
  req.max_tokens = 20;
  req.top_logprobs = 3;
  req.echo = true;
  req.stop_tokens = ts.backend.stop_token_ids();
  CompletionResult expected;
  ASSERT_TRUE(ts.backend.complete(req, &expected));
  const json& got = j["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_TRUE(got[0].is_null());  // the first prompt token has no logprob
  std::vector<float> want(expected.prompt_logprobs.begin() + 1, expected.prompt_logprobs.end());
  for (const auto& t : expected.tokens)
    if (t.token < 256) want.push_back(t.logprob);
  ASSERT_EQ(got.size(), want.size() + 1);
  std::string text = r->body;
  for (size_t i = 0; i < want.size(); ++i) {
    float back = static_cast<float>(got[i + 1].get<double>());
    EXPECT_EQ(std::memcmp(&back, &want[i], 4), 0) << i << ": " << got[i + 1].dump();
  }
  EXPECT_EQ(j["choices"][0]["text"].get<std::string>().substr(0, 4), std::string("\x01\x02\x03\x04"));
}

TEST(ServerHttp, StreamEqualsTheWholeResponse) {
  TestServer ts;
  auto c = ts.client();
  json body = {{"prompt", "The quick brown fox"}, {"max_tokens", 30}, {"logprobs", 1}, {"seed", 5}};
  auto whole = post(*c, "/v1/completions", body);
  ASSERT_EQ(whole->status, 200);
  json w = json::parse(whole->body);
  body["stream"] = true;
  auto streamed = post(*c, "/v1/completions", body);
  ASSERT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  auto events = sse_payloads(streamed->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  json lps = json::array();
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json e = json::parse(events[i]);
    text += e["choices"][0]["text"].get<std::string>();
    if (!e["choices"][0]["logprobs"].is_null())
      for (const auto& v : e["choices"][0]["logprobs"]["token_logprobs"]) lps.push_back(v);
  }
  json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(text, w["choices"][0]["text"]);
  EXPECT_EQ(lps, w["choices"][0]["logprobs"]["token_logprobs"]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], w["choices"][0]["finish_reason"]);
  EXPECT_EQ(last["usage"]["completion_tokens"], w["usage"]["completion_tokens"]);
  EXPECT_TRUE(last["restore"].contains("restore_point"));
}

TEST(ServerHttp, StopStringsCutTextInBothModes) {
  TestServer ts;
  auto c = ts.client();
  json body = {{"prompt", "abc"}, {"max_tokens", 60}, {"seed", 3}};
  std::string full = json::parse(post(*c, "/v1/completions", body)->body)["choices"][0]["text"];
  ASSERT_GE(full.size(), 10u);
  std::string stop = full.substr(5, 2);
  body["stop"] = {stop};
  json j = json::parse(post(*c, "/v1/completions", body)->body);
  std::string cut = full.substr(0, full.find(stop));
  EXPECT_EQ(j["choices"][0]["text"], cut);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  body["stream"] = true;
  auto events = sse_payloads(post(*c, "/v1/completions", body)->body);
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, cut);
}

TEST(ServerHttp, ChatReasoningToolCallsAndStreaming) {
  TestServer ts;
  auto c = ts.client();
  json tools = {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}};
  auto r = post(
      *c, "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "CALL_TOOL please"}}}}, {"tools", tools}, {"max_tokens", 100}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  const json& msg = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>())["city"], "Paris");
  EXPECT_TRUE(msg["content"].is_null());

  auto think =
      post(*c, "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "THINK about it"}}}}, {"max_tokens", 100}, {"stream", true}});
  auto events = sse_payloads(think->body);
  std::string content, reasoning;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json e = json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    const json& d = e["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "let me see");
  EXPECT_EQ(content, "It is 42.");
  EXPECT_EQ(json::parse(events[events.size() - 2])["choices"][0]["finish_reason"], "stop");
}

TEST(ServerHttp, BadInputGetsOpenAIErrorsAndTheServerKeepsServing) {
  ServerOptions o;
  o.max_body_bytes = 4096;
  o.limits.max_prompt_tokens = 100;
  o.limits.max_json_depth = 32;
  TestServer ts(o);
  auto c = ts.client();
  // Oversized body.
  expect_openai_error(c->Post("/v1/completions", std::string(5000, ' '), "application/json"), 413, "");
  expect_serving(*c);
  // Malformed JSON, a non-object, deep nesting.
  expect_openai_error(c->Post("/v1/completions", "{\"prompt\": [1, 2", "application/json"), 400, "");
  expect_openai_error(c->Post("/v1/completions", "[]", "application/json"), 400, "");
  expect_openai_error(
      c->Post("/v1/completions", "{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}", "application/json"),
      400, "");
  expect_serving(*c);
  // Wrong types, negative and huge numbers, bad token ids.
  expect_openai_error(post(*c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", "5"}}), 400, "max_tokens");
  expect_openai_error(post(*c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", -5}}), 400, "max_tokens");
  expect_openai_error(post(*c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 1e30}}), 400, "max_tokens");
  expect_openai_error(post(*c, "/v1/completions", {{"prompt", "x"}, {"temperature", -1}}), 400, "temperature");
  expect_openai_error(post(*c, "/v1/completions", {{"prompt", {1, 2, 99999}}}), 400, "prompt[2]");
  expect_openai_error(post(*c, "/v1/completions", {{"prompt", {1, -2}}}), 400, "prompt[1]");
  expect_openai_error(post(*c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", 3}}}}}), 400,
                      "messages[0].content");
  expect_openai_error(post(*c, "/v1/completions", {{"prompt", "x"}}, {{"X-Cache-Mode", "maybe"}}), 400, "X-Cache-Mode");
  // Prompt too long: token ids and text (checked after tokenising).
  expect_openai_error(post(*c, "/v1/completions", {{"prompt", std::string(101, 'a')}}), 413, "prompt");
  expect_openai_error(
      post(*c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", std::string(200, 'a')}}}}}), 413,
      "messages");
  // Unknown model, unknown route.
  expect_openai_error(post(*c, "/v1/completions", {{"prompt", "x"}, {"model", "gpt-9"}}), 404, "model");
  expect_openai_error(c->Get("/v1/nothing-here"), 404, "");
  expect_openai_error(c->Get("/v1/models/gpt-9"), 404, "model");
  // Unknown fields are refused, naming the field (nothing is silently dropped).
  expect_openai_error(
      post(*c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"unknown", {{"deep", {1, 2}}}}}), 400,
      "unknown");
  expect_serving(*c);
}

TEST(ServerHttp, EngineFailureIsA500WithTheRequestId) {
  TestServer ts;
  auto c = ts.client();
  for (bool stream : {false, true}) {
    auto r = post(*c, "/v1/completions", {{"prompt", {1, 255}}, {"stream", stream}});
    ASSERT_TRUE(r);
    std::string id = r->get_header_value("X-Request-Id");
    ASSERT_FALSE(id.empty());
    if (!stream) {
      expect_openai_error(r, 500, "");
      json e = json::parse(r->body)["error"];
      EXPECT_EQ(e["code"], "internal_error");
      EXPECT_NE(e["message"].get<std::string>().find(id), std::string::npos) << r->body;
    } else {
      // The stream had begun (200): the error comes as an event, then [DONE].
      auto events = sse_payloads(r->body);
      ASSERT_EQ(events.size(), 2u) << r->body;
      EXPECT_NE(events[0].find(id), std::string::npos) << events[0];
      EXPECT_EQ(events[1], "[DONE]");
    }
  }
  expect_serving(*c);
}

TEST(ServerHttp, ApiKeyIsRequiredAndDerivesTheNamespace) {
  ServerOptions o;
  o.keys = ApiKeys::single("sekret");
  TestServer ts(o);
  auto c = ts.client();
  json body = {{"prompt", std::string(40, 'q')}, {"max_tokens", 2}};
  expect_openai_error(post(*c, "/v1/completions", body), 401, "");
  expect_openai_error(post(*c, "/v1/completions", body, {{"Authorization", "Bearer wrong"}}), 401, "");
  expect_openai_error(c->Get("/v1/models"), 401, "");
  expect_openai_error(post(*c, "/tokenize", body), 401, "");
  expect_openai_error(post(*c, "/detokenize", {{"tokens", {72}}}), 401, "");
  EXPECT_EQ(c->Get("/health")->status, 200);  // health stays open for probes
  httplib::Headers auth = {{"Authorization", "Bearer sekret"}};
  EXPECT_EQ(post(*c, "/detokenize", {{"tokens", {72, 105}}}, auth)->body, R"({"prompt":"Hi"})");
  auto first = post(*c, "/v1/completions", body, auth);
  ASSERT_EQ(first->status, 200) << first->body;
  auto second = post(*c, "/v1/completions", body, auth);
  EXPECT_EQ(json::parse(second->body)["restore"]["mode"], "ram");
  // Same key, another cache_salt: a separate namespace.
  body["cache_salt"] = "x";
  EXPECT_EQ(json::parse(post(*c, "/v1/completions", body, auth)->body)["restore"]["mode"], "cold");
}

TEST(ServerHttp, OperatorRoutesNeedTheKeyAndSayWhenThereIsNoBank) {
  ServerOptions o;
  o.keys = ApiKeys::single("sekret");
  TestServer ts(o);
  auto c = ts.client();
  const httplib::Headers auth = {{"Authorization", "Bearer sekret"}};
  expect_openai_error(c->Get("/v1/bank/prefixes"), 401, "");
  expect_openai_error(c->Get("/v1/bank/prefixes", {{"Authorization", "Bearer wrong"}}), 401, "");
  expect_openai_error(c->Delete("/v1/bank/pins/abc"), 401, "");
  // The fake backend has no bank: 501, in OpenAI's shape.
  for (const char* path : {"/v1/bank/prefixes", "/v1/bank/pins"}) {
    auto r = c->Get(path, auth);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 501) << path;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "no_bank");
  }
  EXPECT_EQ(post(*c, "/v1/bank/flush", {{"all", true}}, auth)->status, 501);
  EXPECT_EQ(post(*c, "/v1/bank/pins", {{"chain", std::string(64, 'a')}, {"ttl_s", 5}}, auth)->status, 501);
  // Bad bodies are refused before the backend is asked.
  expect_openai_error(post(*c, "/v1/bank/pins", {{"chain", std::string(64, 'a')}}, auth), 400, "ttl_s");
  expect_openai_error(post(*c, "/v1/bank/flush", {{"all", true}, {"root", "x"}}, auth), 400, "");
  // Recent requests come from the server itself.
  ASSERT_EQ(post(*c, "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 2}}, auth)->status, 200);
  auto r = c->Get("/v1/bank/requests", auth);
  ASSERT_EQ(r->status, 200);
  json j = json::parse(r->body);
  ASSERT_EQ(j["requests"].size(), 1u);
  EXPECT_EQ(j["requests"][0]["prompt_tokens"], 5);
  EXPECT_EQ(j["minutes"][0]["requests"], 1);
  // The page is public and static.
  r = c->Get("/bank");
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("/bank/bank.js"), std::string::npos);
}

TEST(ServerHttp, ClientThatDisconnectsCancelsItsRequest) {
  TestServer ts;
  ts.backend.per_token_sleep_us = 20000;  // 20 ms a token: 1000 tokens would take 20 s
  {
    // Streaming: read the first event, then hang up.
    bool got = false;
    stream_then_hang_up(ts.port, [&] { got = true; });
    EXPECT_TRUE(got);
  }
  for (int i = 0; i < 300 && ts.backend.cancelled.load() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ts.backend.cancelled.load(), 1);
  {
    // Not streaming: give up waiting after a moment.
    httplib::Client c("127.0.0.1", ts.port);
    c.set_read_timeout(0, 300000);
    // Seed 0: the fake's reply has no end-of-text token before the time-out.
    auto r =
        c.Post("/v1/completions", json{{"prompt", "go"}, {"max_tokens", 1000}, {"seed", 0}}.dump(), "application/json");
    EXPECT_FALSE(r);
  }
  for (int i = 0; i < 300 && ts.backend.cancelled.load() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ts.backend.cancelled.load(), 2);
  ts.backend.per_token_sleep_us = 0;
  auto c = ts.client();
  expect_serving(*c);
}

TEST(ServerHttp, FullQueueAnswers429) {
  ServerOptions o;
  EngineOptions e;  // the fake engine's admission
  e.max_running = 1;
  e.max_queue = 1;
  TestServer ts(o, 1 << 20, e);
  ts.backend.hold();
  json body = {{"prompt", "q"}, {"max_tokens", 2}};
  auto a = std::async(std::launch::async, [&] { return post(*ts.client(), "/v1/completions", body)->status; });
  for (int i = 0; i < 500 && ts.backend.running() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(ts.backend.running(), 1);  // the worker holds the first
  auto b = std::async(std::launch::async, [&] { return post(*ts.client(), "/v1/completions", body)->status; });
  // Wait until the second is queued (the metrics gauge says so).
  auto c = ts.client();
  for (int i = 0; i < 500; ++i) {
    if (c->Get("/metrics")->body.find("statebank_queue_depth 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  expect_openai_error(post(*c, "/v1/completions", body), 429, "");
  // Every check comes before admission: with the queue full, a prompt
  // outside the vocabulary is still a 400 naming it, not a 429.
  const json outside = {{"prompt", {1, kFakeVocab}}, {"max_tokens", 2}};
  expect_openai_error(post(*c, "/v1/completions", outside), 400, "prompt[1]");
  ts.backend.release();
  EXPECT_EQ(a.get(), 200);
  EXPECT_EQ(b.get(), 200);
  std::string metrics = c->Get("/metrics")->body;
  EXPECT_NE(metrics.find("statebank_requests_total{endpoint=\"/v1/completions\",code=\"429\"} 1\n"), std::string::npos)
      << metrics;
  EXPECT_EQ(ts.backend.admission().held(), 0u) << "the one count drops to zero once both ended";
}

// A request is counted when its status line goes out, not when its body
// ends: a client holding its answer (here the first event of a stream that
// still runs) finds it in /metrics.
TEST(ServerHttp, RequestIsCountedOnceItsAnswerIsSent) {
  TestServer ts;
  ts.backend.per_token_sleep_us = 20000;  // 1000 tokens would take 20 s
  const std::string counted = "statebank_requests_total{endpoint=\"/v1/completions\",code=\"200\"} 1\n";
  std::string metrics_mid_stream;
  stream_then_hang_up(ts.port, [&] { metrics_mid_stream = ts.client()->Get("/metrics")->body; });
  EXPECT_NE(metrics_mid_stream.find(counted), std::string::npos) << metrics_mid_stream;
  for (int i = 0; i < 300 && ts.backend.cancelled.load() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ts.backend.cancelled.load(), 1);
  EXPECT_NE(ts.client()->Get("/metrics")->body.find(counted), std::string::npos);  // not counted twice
}

TEST(ServerHttp, ShutdownFinishesWhatRunsThenRefuses) {
  TestServer ts;
  ts.backend.hold();
  json body = {{"prompt", "q"}, {"max_tokens", 4}};
  auto a = std::async(std::launch::async, [&] { return post(*ts.client(), "/v1/completions", body)->status; });
  for (int i = 0; i < 500 && ts.backend.running() < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(ts.backend.running(), 1);
  auto stopped = std::async(std::launch::async, [&] { return ts.stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // While draining, new work is refused.
  httplib::Client c("127.0.0.1", ts.port);
  auto refused = post(c, "/v1/completions", body);
  if (refused) expect_openai_error(refused, 503, "");
  ts.backend.release();
  EXPECT_EQ(a.get(), 200);
  EXPECT_TRUE(stopped.get());
  EXPECT_TRUE(ts.backend.flushed.load());
  EXPECT_TRUE(ts.served);
}

}  // namespace
}  // namespace sb::testing
