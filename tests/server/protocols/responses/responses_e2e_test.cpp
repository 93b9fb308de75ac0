// POST /v1/responses end to end, against the real binary serving the demo
// model (`statebank serve --model demo`, generated into a temporary cache):
//  - the openai npm client and the OpenAI Agents SDK
//    (tools/server/responses.test.mjs): text, forced calls, json_schema,
//    streams, bank == bypass bit for bit, an agent run with one tool;
//  - 200 mutated bodies (fixed seed): every one a 4xx in OpenAI's error
//    shape, none a 5xx, the server healthy and serving after them;
//  - Codex CLI (`codex exec`, @openai/codex 0.171.0) with its default
//    configuration (the provider only, as the README says: its namespace of
//    sub-agent tools and its web_search included): exits 0, prints the
//    model's text, and its second run is served from the bank
//    (cached_input_tokens covers the instructions and tools).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/server/node_tests.h"
#include "tests/server/serve_process.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {
namespace {

using json = nlohmann::json;

// The demo model lives in a cache of the test's own (generated on first use).
std::vector<std::string> serve_demo(const TempDir& root, std::vector<std::string> extra = {}) {
  setenv("XDG_CACHE_HOME", root.file("cache").c_str(), 1);
  std::vector<std::string> a = {SB_STATEBANK_BIN, "serve",     "--model",   "demo", "--port",     "0",
                                "--bank-dir",     root.bank(), "--threads", "2",    "--ram-bank", "512M"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(ResponsesE2E, OpenAIClientAndAgentsSdk) {
  TempDir root;
  ServeProcess server(serve_demo(root));
  EXPECT_EQ(run_node_tests("SB_BASE_URL=http://127.0.0.1:" + std::to_string(server.port), "responses.test.mjs"), 0);
  EXPECT_EQ(server.stop(), 0);
}

// --- Mutated bodies.

json valid_body(int which) {
  const json weather = {{"type", "function"},
                        {"name", "get_weather"},
                        {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}};
  switch (which) {
    case 0:
      return json{{"model", "demo"}, {"input", "Hello"}, {"max_output_tokens", 4}};
    case 1:
      return json{{"instructions", "Be brief."},
                  {"input",
                   {{{"role", "user"}, {"content", "Weather?"}},
                    {{"type", "function_call"}, {"call_id", "c1"}, {"name", "get_weather"}, {"arguments", "{}"}},
                    {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "sunny"}},
                    {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "ok"}}}}}}},
                  {"tools", {weather}},
                  {"tool_choice", "auto"},
                  {"max_output_tokens", 4},
                  {"stream", true}};
    default:
      return json{{"input", {{{"role", "user"}, {"content", "A person"}}}},
                  {"text",
                   {{"format",
                     {{"type", "json_schema"},
                      {"name", "p"},
                      {"schema", {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}}}}}}},
                  {"reasoning", {{"effort", "low"}, {"summary", "auto"}}},
                  {"include", {"reasoning.encrypted_content"}},
                  {"store", false},
                  {"prompt_cache_key", "k"},
                  {"max_output_tokens", 8}};
  }
}

// Each mutation makes a body invalid by itself, so a body with any of them is a 4xx.
class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  std::string mutated() {
    json body = valid_body(pick(3));
    const int n = 1 + pick(3);
    bool truncate = false;
    for (int i = 0; i < n; ++i) truncate |= mutate(&body);
    std::string text = body.dump();
    if (truncate) text.resize(pick(static_cast<int>(text.size())));
    return text;
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  json wrong_scalar() {
    switch (pick(4)) {
      case 0:
        return 12345;
      case 1:
        return true;
      case 2:
        return json::array({1, "x"});
      default:
        return json{{"x", 1}};
    }
  }
  // A value of a type none of these fields takes.
  json wrong_for(const std::string& key) {
    for (;;) {
      json v = wrong_scalar();
      const bool number = key == "max_output_tokens" || key == "temperature" || key == "top_p" || key == "top_logprobs";
      const bool boolean = key == "stream" || key == "store" || key == "parallel_tool_calls";
      const bool object = key == "reasoning" || key == "text" || key == "metadata" || key == "tool_choice";
      const bool array = key == "tools" || key == "include" || key == "input";
      if (v.is_number() && number) continue;
      if (v.is_boolean() && boolean) continue;
      if (v.is_object() && object) continue;
      if (v.is_array() && array) continue;
      return v;
    }
  }
  json deep(int levels) {
    json v = "leaf";
    for (int i = 0; i < levels; ++i) v = (i % 2) ? json::array({v}) : json{{"k", v}};
    return v;
  }
  json& some_item(json* body) {
    if (!(*body)["input"].is_array()) (*body)["input"] = json::array({{{"role", "user"}, {"content", "x"}}});
    json& items = (*body)["input"];
    return items[pick(static_cast<int>(items.size()))];
  }
  void insert_item(json* body, json item) {
    some_item(body);  // makes input an array
    json& items = (*body)["input"];
    items.insert(items.begin() + pick(static_cast<int>(items.size()) + 1), std::move(item));
  }

  // Returns true when the body's text is to be cut short (invalid JSON).
  bool mutate(json* body) {
    static const std::vector<std::string> fields = {"input",
                                                    "instructions",
                                                    "max_output_tokens",
                                                    "temperature",
                                                    "top_p",
                                                    "tools",
                                                    "tool_choice",
                                                    "parallel_tool_calls",
                                                    "reasoning",
                                                    "text",
                                                    "stream",
                                                    "include",
                                                    "store",
                                                    "metadata",
                                                    "prompt_cache_key",
                                                    "model",
                                                    "top_logprobs"};
    static const std::vector<std::string> item_types = {
        "web_search_call",       "file_search_call", "computer_call", "computer_call_output", "item_reference",
        "image_generation_call", "local_shell_call", "mcp_call",      "custom_tool_call",     "bogus"};
    // Tools of a shape no tool has (built-in tools are left out, not refused).
    static const std::vector<json> bad_tools = {{{"type", "namespace"}, {"name", "n"}},
                                                {{"type", "namespace"}, {"tools", json::array()}},
                                                {{"type", "function"}},
                                                {{"type", 3}},
                                                {{"name", "f"}}};
    switch (pick(12)) {
      case 0: {
        const std::string& k = fields[pick(static_cast<int>(fields.size()))];
        (*body)[k] = wrong_for(k);
        return false;
      }
      case 1:
        insert_item(body, {{"type", item_types[pick(static_cast<int>(item_types.size()))]}, {"id", "x1"}});
        return false;
      case 2:
        insert_item(
            body,
            {{"type", "function_call_output"}, {"call_id", "orphan_" + std::to_string(pick(1000))}, {"output", "x"}});
        return false;
      case 3:
        (*body)[pick(2) ? "metadata" : "input"] = deep(65 + pick(3000));
        return false;
      case 4: {
        json& item = some_item(body);
        static const std::vector<std::string> keys = {"role", "content",   "type",  "call_id",
                                                      "name", "arguments", "output"};
        const std::string& k = keys[pick(static_cast<int>(keys.size()))];
        item[k] = wrong_scalar();  // a field the item does not take, or a type it does not take
        return false;
      }
      case 5:
        (*body)["unknown_field_" + std::to_string(pick(100))] = 1;
        return false;
      case 6:
        insert_item(body, {{"role", "user"},
                           {"content", {{{"type", pick(2) ? "input_image" : "input_video"}, {"image_url", "x"}}}}});
        return false;
      case 7:
        (*body)["tools"] = json::array({bad_tools[pick(static_cast<int>(bad_tools.size()))]});
        return false;
      case 8: {
        static const std::vector<std::pair<std::string, json>> refused = {{"previous_response_id", "resp_1"},
                                                                          {"store", true},
                                                                          {"background", true},
                                                                          {"conversation", "c"},
                                                                          {"prompt", {{"id", "p"}}},
                                                                          {"truncation", "auto"},
                                                                          {"max_tool_calls", 3},
                                                                          {"service_tier", "flex"}};
        const auto& [k, v] = refused[pick(static_cast<int>(refused.size()))];
        (*body)[k] = v;
        return false;
      }
      case 9: {
        static const std::vector<std::pair<std::string, json>> range = {
            {"temperature", 5},          {"top_p", -1},        {"max_output_tokens", 0},
            {"max_output_tokens", 1e20}, {"top_logprobs", 50}, {"temperature", "hot"}};
        const auto& [k, v] = range[pick(static_cast<int>(range.size()))];
        (*body)[k] = v;
        return false;
      }
      case 10:
        body->erase("input");
        return false;
      default:
        return true;
    }
  }

  std::mt19937 rng_;
};

TEST(ResponsesE2E, MutatedBodiesAreClear4xxErrors) {
  TempDir root;
  ServeProcess server(serve_demo(root));
  httplib::Client c = server.client();
  Mutator mutator(37);
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string body = mutator.mutated();
    auto r = c.Post("/v1/responses", body, "application/json");
    ASSERT_TRUE(r) << "no answer to body " << i << ": " << body.substr(0, 300);
    EXPECT_GE(r->status, 400) << body.substr(0, 300) << "\n" << r->body.substr(0, 300);
    EXPECT_LT(r->status, 500) << body.substr(0, 300) << "\n" << r->body.substr(0, 300);
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object() && e.contains("error")) << r->body.substr(0, 300);
    EXPECT_TRUE(e["error"]["message"].is_string() && !e["error"]["message"].get<std::string>().empty());
    EXPECT_TRUE(e["error"]["type"].is_string());
    EXPECT_TRUE(e["error"].contains("param") && e["error"].contains("code")) << r->body;
    refused += r->status >= 400 && r->status < 500;
  }
  EXPECT_EQ(refused, 200);
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  for (int which = 0; which < 3; ++which) {
    auto ok = c.Post("/v1/responses", valid_body(which).dump(), "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body.substr(0, 300);
  }
  EXPECT_EQ(server.stop(), 0);
}

// A reply cut by --request-timeout: a 504 in OpenAI's shape, or in a stream
// one `error` event after the events so far.
TEST(ResponsesE2E, DeadlineEndsWithAnErrorInEitherForm) {
  TempDir root;
  ServeProcess server(serve_demo(root, {"--request-timeout", "1"}));
  httplib::Client c = server.client();
  const json body = {{"input", "Tell me everything."}, {"max_output_tokens", 30000}};
  auto whole = c.Post("/v1/responses", body.dump(), "application/json");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 504) << whole->body.substr(0, 300);
  EXPECT_EQ(json::parse(whole->body)["error"]["code"], "deadline_exceeded");
  json streamed = body;
  streamed["stream"] = true;
  auto s = c.Post("/v1/responses", streamed.dump(), "application/json");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200);
  EXPECT_EQ(s->body.rfind("event: response.created\n", 0), 0u) << s->body.substr(0, 300);
  const size_t last = s->body.rfind("event: ");
  ASSERT_NE(last, std::string::npos);
  EXPECT_EQ(s->body.compare(last, 13, "event: error\n"), 0) << s->body.substr(last, 300);
  const json error = json::parse(s->body.substr(s->body.find("data: ", last) + 6));
  EXPECT_EQ(error["type"], "error");
  EXPECT_EQ(error["code"], "deadline_exceeded");
  EXPECT_EQ(s->body.find("response.completed"), std::string::npos);
  EXPECT_EQ(server.stop(), 0);
}

// --- Codex CLI.

std::string codex_config(int port) {
  return "model = \"demo\"\n"
         "model_provider = \"statebank\"\n\n"
         "[model_providers.statebank]\n"
         "name = \"statebank\"\n"
         "base_url = \"http://127.0.0.1:" +
         std::to_string(port) +
         "/v1\"\n"
         "wire_api = \"responses\"\n"
         "env_key = \"STATEBANK_API_KEY\"\n";
}

TEST(ResponsesE2E, CodexExecRunsAgainstTheDemoModel) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  ASSERT_TRUE(src) << "run through ctest";
  TempDir root;
  // Random weights rarely end a reply: the operator's cap keeps each turn short.
  ServeProcess server(serve_demo(root, {"--max-tokens-cap", "24"}));
  const std::string home = root.file("codex-home"), work = root.file("work");
  std::filesystem::create_directories(home);
  std::filesystem::create_directories(work);
  std::ofstream(home + "/config.toml") << codex_config(server.port);
  const std::string codex = "cd " + work + " && CODEX_HOME=" + home + " STATEBANK_API_KEY=unused timeout 300 " +
                            std::string(src) + "/tools/npm/node_modules/.bin/codex exec --skip-git-repo-check ";
  std::string text, events;
  ASSERT_EQ(run_shell(codex + "'say hi' </dev/null 2>" + home + "/first.log", &text), 0) << text;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  EXPECT_FALSE(text.empty());
  ASSERT_EQ(run_shell(codex + "--json 'say hi' </dev/null 2>" + home + "/second.log", &events), 0) << events;
  std::string said;
  json usage;
  std::istringstream lines(events);
  for (std::string line; std::getline(lines, line);) {
    const json e = json::parse(line, nullptr, false);
    if (!e.is_object()) continue;
    if (e["type"] == "item.completed" && e["item"]["type"] == "agent_message") said = e["item"]["text"];
    if (e["type"] == "turn.completed") usage = e["usage"];
  }
  // Greedy decoding of the same prompt: the second run says what the first printed.
  EXPECT_EQ(said, text);
  ASSERT_TRUE(usage.is_object()) << events;
  const int64_t input = usage["input_tokens"], cached = usage["cached_input_tokens"];
  // The instructions and tools alone are over 4k tokens; only the environment
  // context and the user's words (well under 512 tokens) follow them.
  EXPECT_GT(input, 4096);
  EXPECT_GE(cached, 4096);
  EXPECT_GE(cached, input - 512) << events;
  // A reply the cap cut is complete: only the request's own limit makes it incomplete.
  httplib::Client c = server.client();
  auto capped = c.Post("/v1/responses", json{{"input", "hi"}, {"max_output_tokens", 100}}.dump(), "application/json");
  ASSERT_TRUE(capped);
  const json r = json::parse(capped->body);
  EXPECT_EQ(r["status"], "completed") << capped->body.substr(0, 300);
  EXPECT_LE(r["usage"]["output_tokens"].get<int>(), 24);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace sb::testing
