// OutputParser: reasoning, content and tool calls in both families, whole and
// streamed in arbitrary pieces (every split must give the same result), with
// held-back partial tags, malformed calls kept as content, schema-typed XML
// parameters, and the round trip: rendering the parsed message with the chat
// template reproduces the model's own text.
#include <gtest/gtest.h>

#include <random>

#include "tests/tokenizer/chat_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/output_parser.h"

namespace sb {
namespace {

using ojson = nlohmann::ordered_json;

ParsedDelta parse_whole(ChatFlavour f, bool opened, std::string_view text, const ojson& tools = nullptr) {
  OutputParser p(f, opened);
  p.set_tools(tools);
  p.push(text);
  p.finish();
  return p.result();
}

void expect_same(const ParsedDelta& a, const ParsedDelta& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  EXPECT_EQ(a.reasoning_content, b.reasoning_content) << what;
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << what;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].index, b.tool_calls[i].index) << what;
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << what;
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << what;
  }
}

// Feeds `text` in the given pieces, concatenating the deltas.
ParsedDelta parse_pieces(ChatFlavour f, bool opened, const std::vector<std::string>& pieces) {
  OutputParser p(f, opened);
  ParsedDelta sum;
  auto add = [&](const ParsedDelta& d) {
    sum.content += d.content;
    sum.reasoning_content += d.reasoning_content;
    sum.tool_calls.insert(sum.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  };
  for (const auto& piece : pieces) add(p.push(piece));
  add(p.finish());
  expect_same(sum, p.result(), "deltas vs result()");
  return sum;
}

const char kJsonOutput[] =
    "<think>\nThe user wants weather.\n\nCall the tool.\n</think>\n\nLet me check.\n"
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
const char kXmlOutput[] =
    "The user wants weather.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n"
    "<parameter=city>\nSan Francisco\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
    "<parameter=opts>\n{\"unit\": \"C\"}\n</parameter>\n</function>\n</tool_call>";

TEST(OutputParser, JsonFamilyReasoningContentAndCalls) {
  ParsedDelta r = parse_whole(ChatFlavour::kQwen3Json, false, kJsonOutput);
  EXPECT_EQ(r.reasoning_content, "The user wants weather.\n\nCall the tool.");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].index, 0);
  EXPECT_EQ(r.tool_calls[0].id, "call_0");
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Paris\", \"days\": 2}");
  EXPECT_EQ(r.tool_calls[1].index, 1);
  EXPECT_EQ(r.tool_calls[1].name, "get_time");
  EXPECT_EQ(r.tool_calls[1].arguments, "{}");

  ParsedDelta plain = parse_whole(ChatFlavour::kQwen3Json, false, "Hello <b>world</b>!\n");
  EXPECT_EQ(plain.content, "Hello <b>world</b>!\n");
  EXPECT_TRUE(plain.reasoning_content.empty());
  EXPECT_TRUE(plain.tool_calls.empty());
}

TEST(OutputParser, XmlFamilyTypedParameters) {
  ParsedDelta r = parse_whole(ChatFlavour::kQwen35Xml, true, kXmlOutput);
  EXPECT_EQ(r.reasoning_content, "The user wants weather.");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"San Francisco\", \"days\": 3, \"opts\": {\"unit\": \"C\"}}");

  ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "string"}, "opts": {"type": "object"}}}}}])");
  r = parse_whole(ChatFlavour::kQwen35Xml, true, kXmlOutput, tools);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"San Francisco\", \"days\": \"3\", \"opts\": {\"unit\": \"C\"}}");

  ParsedDelta b = parse_whole(ChatFlavour::kQwen35Xml, false,
                              "<tool_call>\n<function=f>\n<parameter=on>\nTrue\n</parameter>\n</function>\n</tool_call>",
                              ojson::parse(R"([{"function": {"name": "f", "parameters": {"properties": {"on": {"type": "boolean"}}}}}])"));
  ASSERT_EQ(b.tool_calls.size(), 1u);
  EXPECT_EQ(b.tool_calls[0].arguments, "{\"on\": true}");
}

TEST(OutputParser, StreamingInAnyPiecesGivesTheSameResult) {
  std::mt19937 rng(7);
  struct Case {
    ChatFlavour f;
    bool opened;
    std::string text;
  };
  std::vector<Case> cases = {
      {ChatFlavour::kQwen3Json, false, kJsonOutput},
      {ChatFlavour::kQwen35Xml, true, kXmlOutput},
      {ChatFlavour::kQwen3Json, false, "  <think>x</think>y <tool_call>{bad json}</tool_call> tail <tool"},
      {ChatFlavour::kQwen35Xml, false, "a < b and <think> is text here </think> <tool_call"},
      {ChatFlavour::kQwen35Xml, true, "\n\nthinking\n\n\n</think>\n\n\nanswer\n\n"},
  };
  for (const Case& c : cases) {
    ParsedDelta whole = parse_whole(c.f, c.opened, c.text);
    // Every two-piece split.
    for (size_t cut = 0; cut <= c.text.size(); ++cut)
      expect_same(parse_pieces(c.f, c.opened, {c.text.substr(0, cut), c.text.substr(cut)}), whole,
                  c.text + " cut at " + std::to_string(cut));
    // One byte at a time, and random pieces.
    std::vector<std::string> bytes;
    for (char ch : c.text) bytes.push_back(std::string(1, ch));
    expect_same(parse_pieces(c.f, c.opened, bytes), whole, c.text + " bytewise");
    for (int k = 0; k < 50; ++k) {
      std::vector<std::string> pieces;
      for (size_t i = 0; i < c.text.size();) {
        size_t n = 1 + rng() % 7;
        pieces.push_back(c.text.substr(i, n));
        i += n;
      }
      expect_same(parse_pieces(c.f, c.opened, pieces), whole, c.text + " random pieces");
    }
  }
}

TEST(OutputParser, HoldsBackOnlyWhatCouldStillBecomeATag) {
  OutputParser p(ChatFlavour::kQwen3Json, false);
  EXPECT_EQ(p.push("Hello").content, "Hello");
  EXPECT_EQ(p.push(" wor").content, " wor");
  ParsedDelta d = p.push("ld <tool");
  EXPECT_EQ(d.content, "ld");  // " <tool" could start a call
  d = p.push("box>");
  EXPECT_EQ(d.content, " <toolbox>");
  d = p.push("\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n");
  EXPECT_TRUE(d.content.empty());
  EXPECT_TRUE(d.tool_calls.empty());
  d = p.push("</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\": 1}");
  d = p.finish();
  EXPECT_TRUE(d.empty());

  OutputParser r(ChatFlavour::kQwen35Xml, true);
  EXPECT_EQ(r.push("step one\n").reasoning_content, "step one");
  EXPECT_EQ(r.push("</thi").reasoning_content, "");
  d = r.push("nk>\n\nDone.");
  EXPECT_EQ(d.reasoning_content, "");
  EXPECT_EQ(d.content, "Done.");
}

TEST(OutputParser, MalformedOrUnfinishedCallsAreKeptAsContent) {
  ParsedDelta r = parse_whole(ChatFlavour::kQwen3Json, false, "x <tool_call>{not json}</tool_call> y");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "x<tool_call>{not json}</tool_call> y");
  r = parse_whole(ChatFlavour::kQwen3Json, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": ");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": ");
  // Complete body, closing tag cut off by max_tokens: still a call.
  r = parse_whole(ChatFlavour::kQwen3Json, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  // Unterminated reasoning stays reasoning.
  r = parse_whole(ChatFlavour::kQwen35Xml, true, "still thinking");
  EXPECT_EQ(r.reasoning_content, "still thinking");
  EXPECT_TRUE(r.content.empty());
  // <think> in the middle of content is content.
  r = parse_whole(ChatFlavour::kQwen3Json, false, "Use <think> tags.");
  EXPECT_EQ(r.content, "Use <think> tags.");
}

TEST(OutputParser, RenderingTheParsedMessageReproducesTheOutput) {
  // The real Qwen3 (JSON calls) and Qwen3.5 (XML calls, prompt opens <think>) templates.
  const std::string kJsonSource = test::read_text(test::template_path("qwen3.jinja"));
  const std::string kXmlSource = test::read_text(test::template_path("qwen3.5.jinja"));
  struct Case {
    std::string source;
    std::string output;
  };
  for (const Case& c : {Case{kJsonSource, kJsonOutput}, Case{kXmlSource, kXmlOutput}}) {
    ChatTemplate t;
    ASSERT_TRUE(ChatTemplate::from_source(c.source, &t).is_ok());
    RenderedChat prompt;
    ChatMessage user{"user", "Weather?", std::nullopt, {}, ""};
    ChatOptions gen;
    gen.enable_thinking = true;
    ASSERT_TRUE(t.render(std::vector<ChatMessage>{user}, nullptr, gen, &prompt).is_ok());
    OutputParser p(t.flavour(), prompt.opens_thinking);
    p.push(c.output);
    p.finish();
    ChatMessage reply{"assistant", p.result().content, p.result().reasoning_content, {}, ""};
    for (const auto& tc : p.result().tool_calls) reply.tool_calls.push_back({tc.id, tc.name, tc.arguments});
    RenderedChat history;
    ChatOptions no_gen = gen;
    no_gen.add_generation_prompt = false;
    ASSERT_TRUE(t.render(std::vector<ChatMessage>{user, reply}, nullptr, no_gen, &history).is_ok());
    std::string as_generated = prompt.text + c.output + "<|im_end|>\n";
    EXPECT_EQ(history.text, as_generated);
  }
}

}  // namespace
}  // namespace sb
