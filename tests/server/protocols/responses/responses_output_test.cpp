// The Responses renderer: the event sequence of a stream, and the response
// object a stream ends with equal to the one a whole response gives.
#include "server/protocols/responses/responses_output.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sb {
namespace {

using json = ResponseJson;

ResponsesSetup setup(bool stream) {
  ResponsesSetup s;
  s.id = "abc";
  s.model = "m";
  s.created_at = 7;
  s.stream = stream;
  s.reasoning_summary = true;
  s.output_logprobs = true;
  s.echo = json{{"tools", json::array()}, {"temperature", 1.0f}};
  return s;
}

ChatDelta text(const std::string& content, const std::string& reasoning = "") {
  ChatDelta d;
  d.content = content;
  d.reasoning = reasoning;
  return d;
}

json lp(float v) {
  return json::array({{{"token", "t"}, {"logprob", v}, {"bytes", {116}}, {"top_logprobs", json::array()}}});
}

// Runs the same deltas through a stream and a whole response.
struct Rendered {
  std::vector<json> events;
  std::vector<std::string> types;
  json whole;
};

Rendered run(bool client_limit, bool length) {
  ChatDelta call;
  call.tool_calls.push_back(GeneratedToolCall{"call_1", "get_weather", "{\"city\":\"Paris\"}"});
  const std::vector<std::pair<ChatDelta, json>> deltas = {{text("", "Let me "), lp(-1)}, {text("", "think."), lp(-2)},
                                                          {text("Hel"), lp(-0.5f)},      {text(""), lp(-0.25f)},
                                                          {text("lo"), lp(-0.125f)},     {call, json::array()}};
  ResponsesEnd end;
  end.input_tokens = 10;
  end.cached_tokens = 4;
  end.output_tokens = 6;
  end.length = length;
  end.seed = 3;
  end.restore = json{{"mode", "ram"}};
  Rendered r;
  for (bool stream : {true, false}) {
    ResponsesSetup s = setup(stream);
    s.client_limit = client_limit;
    ResponsesOutput out(s);
    std::vector<std::string> events;
    out.start(&events);
    for (const auto& [d, l] : deltas) out.push(d, l, &events);
    if (!stream) {
      EXPECT_TRUE(events.empty());
      r.whole = out.response(end);
      continue;
    }
    out.finish(end, &events);
    for (const auto& e : events) {
      const size_t nl = e.find('\n');
      EXPECT_EQ(e.rfind("event: ", 0), 0u);
      EXPECT_EQ(e.compare(nl + 1, 6, "data: "), 0);
      json body = json::parse(e.substr(nl + 7));
      EXPECT_EQ(body["type"], e.substr(7, nl - 7));
      EXPECT_EQ(body["sequence_number"], r.events.size());
      r.types.push_back(body["type"]);
      r.events.push_back(std::move(body));
    }
  }
  return r;
}

TEST(ResponsesOutput, StreamIsTheResponsesEventSequence) {
  Rendered r = run(false, false);
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",
                                         "response.reasoning_summary_part.added",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_summary_text.delta",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_summary_text.delta",
                                         "response.reasoning_text.done",
                                         "response.reasoning_summary_text.done",
                                         "response.reasoning_summary_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.content_part.added",
                                         "response.output_text.delta",
                                         "response.output_text.delta",
                                         "response.output_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  EXPECT_EQ(r.types, want);
  const json& done = r.events.back()["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(done["usage"]["output_tokens_details"]["reasoning_tokens"], 2);
  EXPECT_EQ(done["usage"]["total_tokens"], 16);
  EXPECT_EQ(done["restore"]["mode"], "ram");
  const json& out = done["output"];
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[0]["content"][0]["text"], "Let me think.");
  EXPECT_EQ(out[0]["summary"][0]["text"], "Let me think.");
  EXPECT_EQ(out[1]["type"], "message");
  EXPECT_EQ(out[1]["content"][0]["text"], "Hello");
  // The held token's log-probability travels with the text it completed.
  EXPECT_EQ(out[1]["content"][0]["logprobs"].size(), 3u);
  EXPECT_EQ(out[2]["type"], "function_call");
  EXPECT_EQ(out[2]["call_id"], "call_1");
  EXPECT_EQ(out[2]["arguments"], "{\"city\":\"Paris\"}");
  // Each item's done event carries the item as the response lists it.
  EXPECT_EQ(r.events[11]["item"], out[0]);
  EXPECT_EQ(r.events[18]["item"], out[1]);
  EXPECT_EQ(r.events[22]["item"], out[2]);
  EXPECT_EQ(r.events[10]["part"], out[0]["summary"][0]);
  // The created event has no output yet; the whole response equals the stream's last.
  EXPECT_EQ(r.events[0]["response"]["status"], "in_progress");
  EXPECT_TRUE(r.events[0]["response"]["output"].empty());
  EXPECT_EQ(r.whole.dump(), done.dump());
}

TEST(ResponsesOutput, OnlyTheClientsOwnLimitMakesItIncomplete) {
  EXPECT_EQ(run(false, true).whole["status"], "completed");
  // A call was made: the reply is complete although the limit was reached.
  Rendered r = run(true, true);
  EXPECT_EQ(r.whole["status"], "completed");
  ResponsesSetup s = setup(true);
  s.client_limit = true;
  ResponsesOutput out(s);
  std::vector<std::string> events;
  out.push(text("cut sh"), json::array(), &events);
  ResponsesEnd end;
  end.length = true;
  out.finish(end, &events);
  EXPECT_EQ(events.back().rfind("event: response.incomplete\n", 0), 0u) << events.back();
  EXPECT_NE(events.back().find("\"incomplete_details\":{\"reason\":\"max_output_tokens\"}"), std::string::npos);
}

// A call to a namespace's function comes back as OpenAI's API returns it:
// the function's own name and its namespace; the warnings ride on the response.
TEST(ResponsesOutput, ANamespacedCallIsSplitBackAndWarningsAreShown) {
  for (bool stream : {true, false}) {
    ResponsesSetup s = setup(stream);
    s.namespaced["multi_agent_v1__spawn_agent"] = {"multi_agent_v1", "spawn_agent"};
    s.warnings = {"tools[9]: left out"};
    ResponsesOutput out(s);
    std::vector<std::string> events;
    out.start(&events);
    ChatDelta call;
    call.tool_calls.push_back(GeneratedToolCall{"call_1", "multi_agent_v1__spawn_agent", "{}"});
    call.tool_calls.push_back(GeneratedToolCall{"call_2", "get_weather", "{}"});
    out.push(call, json::array(), stream ? &events : nullptr);
    ResponsesEnd end;
    json r;
    if (stream) {
      out.finish(end, &events);
      const std::string& last = events.back();
      r = json::parse(last.substr(last.find("data: ") + 6))["response"];
      EXPECT_NE(events[0].find("\"warnings\":[\"tools[9]: left out\"]"), std::string::npos) << events[0];
    } else {
      r = out.response(end);
    }
    ASSERT_EQ(r["output"].size(), 2u) << r.dump();
    EXPECT_EQ(r["output"][0]["name"], "spawn_agent");
    EXPECT_EQ(r["output"][0]["namespace"], "multi_agent_v1");
    EXPECT_EQ(r["output"][1]["name"], "get_weather");
    EXPECT_FALSE(r["output"][1].contains("namespace"));
    EXPECT_EQ(r["warnings"], json::array({"tools[9]: left out"}));
  }
}

}  // namespace
}  // namespace sb
