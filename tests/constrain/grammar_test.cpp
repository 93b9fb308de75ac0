// The byte automaton of compiled grammars: which texts each schema and tool
// syntax accepts and refuses (object keys, required, additionalProperties,
// arrays with bounds, strings with lengths and escapes, numbers and
// integers, enum/const, anyOf, $ref recursion, whitespace gaps, nesting),
// min_rest() against brute force, and Constraint on a byte vocabulary:
// random logits, every run ends complete and valid within max_tokens, and
// allowed logits are never changed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "constrain/constraint.h"

namespace sb::constrain {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<Grammar> schema(const ojson& s) {
  std::shared_ptr<Grammar> g;
  Status st = Grammar::from_json_schema(s, "schema", &g);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return g;
}

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.advance(text) && m.can_end();
}

bool prefix_ok(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.advance(text);
}

TEST(Grammar, ObjectsKeysRequiredAndAdditional) {
  auto g = schema({{"type", "object"},
                   {"properties", {{"name", {{"type", "string"}}}, {"age", {{"type", "integer"}}}}},
                   {"required", {"name"}},
                   {"additionalProperties", false}});
  for (const char* ok : {R"({"name":"x"})", R"({"name": "x", "age": 3})", R"({"age":-12,"name":""})",
                         "{\n  \"name\": \"a\\n\\u00e9\"\n}", R"({ "name" : "é" })"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {R"({})", R"({"age":3})", R"({"name":"x","extra":1})", R"({"name":"x","name":"y"})",
                          R"({"name":1})", R"({"name":"x",})", R"({"age":3.5,"name":"x"})", R"({"age":01,"name":"x"})",
                          "{\"name\":\"\x01\"}", R"({"name":"x"} )", "{  \"name\":\"x\"}", R"({"nam\u0065":"x"})"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
  // Additional keys allowed by default, typed by a schema when given.
  auto open = schema({{"type", "object"}, {"properties", {{"a", {{"type", "boolean"}}}}}});
  EXPECT_TRUE(accepts(open, R"({"a":true,"b":[1,{"c":null}],"d":"e"})"));
  EXPECT_FALSE(accepts(open, R"({"a":"no"})"));
  auto typed = schema({{"type", "object"}, {"additionalProperties", {{"type", "number"}}}});
  EXPECT_TRUE(accepts(typed, R"({"x":1.5e3,"y":-0})"));
  EXPECT_FALSE(accepts(typed, R"({"x":"1"})"));
}

TEST(Grammar, ArraysStringsNumbersLiteralsAnyOf) {
  auto arr = schema({{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 2}}}, {"minItems", 1}, {"maxItems", 2}});
  EXPECT_TRUE(accepts(arr, R"(["a"])"));
  EXPECT_TRUE(accepts(arr, R"(["ab", "é"])"));
  EXPECT_FALSE(accepts(arr, R"([])"));
  EXPECT_FALSE(accepts(arr, R"(["a","b","c"])"));
  EXPECT_FALSE(accepts(arr, R"(["abc"])"));
  auto str = schema({{"type", "string"}, {"minLength", 2}});
  EXPECT_TRUE(accepts(str, R"("\"\\")"));
  EXPECT_FALSE(accepts(str, R"("a")"));
  EXPECT_FALSE(accepts(str, "\"\xC3\""));  // cut UTF-8
  auto num = schema({{"type", "number"}});
  for (const char* ok : {"0", "-0.5", "12e-3", "1E+9", "3.25"}) EXPECT_TRUE(accepts(num, ok)) << ok;
  for (const char* bad : {"01", "1.", ".5", "-", "1e", "+1", "NaN"}) EXPECT_FALSE(accepts(num, bad)) << bad;
  auto en = schema({{"enum", {"red", 12, nullptr, {{"k", 1}}}}});
  for (const char* ok : {R"("red")", "12", "null", R"({"k":1})"}) EXPECT_TRUE(accepts(en, ok)) << ok;
  for (const char* bad : {R"("re")", "1", "123", R"({"k": 1})"}) EXPECT_FALSE(accepts(en, bad)) << bad;
  auto any = schema({{"anyOf", {{{"type", "integer"}}, {{"type", "object"}, {"properties", {{"a", {{"const", "x"}}}}},
                                                        {"required", {"a"}}, {"additionalProperties", false}}}}});
  EXPECT_TRUE(accepts(any, "42"));
  EXPECT_TRUE(accepts(any, R"({"a":"x"})"));
  EXPECT_FALSE(accepts(any, R"({"a":"y"})"));
  auto types = schema({{"type", {"string", "null"}}});
  EXPECT_TRUE(accepts(types, "null"));
  EXPECT_TRUE(accepts(types, R"("s")"));
  EXPECT_FALSE(accepts(types, "true"));
}

TEST(Grammar, RefsRecurseAndNestingIsBounded) {
  ojson tree = {{"$defs", {{"node", {{"type", "object"},
                                     {"properties", {{"v", {{"type", "integer"}}}, {"kids", {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}}}}},
                                     {"required", {"v"}},
                                     {"additionalProperties", false}}}}},
                {"$ref", "#/$defs/node"}};
  auto g = schema(tree);
  EXPECT_TRUE(accepts(g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(accepts(g, R"({"v":1,"kids":[{"w":2}]})"));
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += R"({"v":0,"kids":[)";
  EXPECT_FALSE(prefix_ok(g, deep));  // beyond 32 frames
}

TEST(Grammar, WhitespaceGapsAreBounded) {
  auto g = Grammar::any_json_object();
  EXPECT_TRUE(accepts(g, "{\"a\": [1, 2]}"));
  EXPECT_TRUE(accepts(g, "{\n\t\t\"a\":\n  1\n}"));
  EXPECT_FALSE(accepts(g, "{  \"a\":1}"));
  EXPECT_FALSE(accepts(g, std::string("{\n") + std::string(21, ' ') + "\"a\":1}"));
  EXPECT_FALSE(accepts(g, "[1]"));  // json_object: an object
}

TEST(Grammar, ToolCallsInBothSyntaxes) {
  ojson tools = {{{"type", "function"},
                  {"function", {{"name", "get_weather"},
                                {"parameters", {{"type", "object"},
                                                {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}},
                                                {"required", {"city"}}}}}}},
                 {{"type", "function"}, {"function", {{"name", "noop"}}}}};
  std::shared_ptr<Grammar> json_calls, xml_calls, one;
  ASSERT_TRUE(Grammar::tool_calls(tools, Grammar::CallSyntax::kJson, true, &json_calls).is_ok());
  ASSERT_TRUE(Grammar::tool_calls(tools, Grammar::CallSyntax::kXml, true, &xml_calls).is_ok());
  ASSERT_TRUE(Grammar::tool_calls(tools, Grammar::CallSyntax::kJson, false, &one).is_ok());
  const std::string a = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";
  const std::string b = "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(accepts(json_calls, a));
  EXPECT_TRUE(accepts(json_calls, a + "\n" + b));
  EXPECT_TRUE(accepts(one, b));
  EXPECT_FALSE(accepts(one, a + "\n" + b));
  EXPECT_FALSE(accepts(json_calls, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 2}}\n</tool_call>"));
  EXPECT_FALSE(accepts(json_calls, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  const std::string x =
      "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n<parameter=city>\nNew\nYork\n</parameter>\n"
      "</function>\n</tool_call>";
  EXPECT_TRUE(accepts(xml_calls, x));
  EXPECT_TRUE(accepts(xml_calls, "<tool_call>\n<function=noop>\n</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(xml_calls, "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(xml_calls, "<tool_call>\n<function=get_weather>\n<parameter=city>\na</parameter>b\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(xml_calls, "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n<parameter=city>\nx\n</parameter>\n</function>\n</tool_call>"));
  // Reasoning first, for prompts that leave <think> open.
  auto reasoned = Grammar::after_reasoning(one);
  EXPECT_TRUE(accepts(reasoned, "I should call it.\n</think>\n\n" + b));
  EXPECT_FALSE(accepts(reasoned, b));
}

// Brute force: the shortest completion over a small alphabet, by breadth-first search.
int64_t shortest_completion(const std::shared_ptr<const Grammar>& g, const std::string& prefix, int limit) {
  const std::string alphabet = "{}[]\":,0-1.eatrufnl \nxyz";
  std::vector<std::string> frontier = {prefix};
  for (int depth = 0; depth <= limit; ++depth) {
    std::vector<std::string> next;
    for (const auto& t : frontier) {
      Matcher m(g);
      if (!m.advance(t)) continue;
      if (m.can_end()) return depth;
      for (char c : alphabet) next.push_back(t + c);
    }
    frontier = std::move(next);
    if (frontier.size() > 200000) break;
  }
  return -1;
}

TEST(Matcher, MinRestIsNeverBelowTheShortestCompletion) {
  auto g = schema({{"type", "object"},
                   {"properties", {{"a", {{"type", "array"}, {"items", {{"type", "integer"}}}, {"minItems", 2}}},
                                   {"b", {{"enum", {"xy", "x"}}}}}},
                   {"required", {"a", "b"}},
                   {"additionalProperties", false}});
  for (const char* prefix : {"", "{", "{\"a\"", "{\"a\":[", "{\"a\":[1", "{\"a\":[1,", "{\"a\":[1,2],", "{\"b\":\"x"}) {
    Matcher m(g);
    ASSERT_TRUE(m.advance(prefix)) << prefix;
    int64_t brute = shortest_completion(g, prefix, 5);
    if (brute >= 0) EXPECT_GE(m.min_rest(), brute) << prefix;
    EXPECT_LT(m.min_rest(), 40) << prefix;  // and not wildly above
  }
}

// A vocabulary of the 256 single bytes plus some multi-byte tokens, stop = 256.
std::shared_ptr<Vocabulary> byte_vocabulary() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("");  // 256: the stop token
  for (const char* t : {"\": \"", "\", \"", "{\"", "\"}", "true", "null", "12", "ab", "é", "\xE6", "\x96\x87", "<tool_call>"})
    bytes.push_back(t);
  return std::make_shared<Vocabulary>(std::move(bytes), std::vector<int32_t>{256});
}

TEST(Constraint, RandomLogitsAlwaysGiveACompleteValidOutputWithinTheBudget) {
  auto vocab = byte_vocabulary();
  auto g = schema({{"type", "object"},
                   {"properties", {{"name", {{"type", "string"}, {"maxLength", 6}}},
                                   {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                                   {"ok", {{"type", "boolean"}}},
                                   {"n", {{"type", "number"}}}}},
                   {"required", {"name", "ok"}},
                   {"additionalProperties", false}});
  std::mt19937_64 rng(7);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  for (int run = 0; run < 60; ++run) {
    const int64_t max_tokens = 30 + run % 20;
    Constraint c(vocab, g);
    std::string out;
    bool stopped = false;
    for (int64_t i = 0; i < max_tokens && !stopped; ++i) {
      std::vector<float> logits(vocab->size());
      for (auto& l : logits) l = noise(rng);
      std::vector<float> before = logits;
      c.mask(logits, max_tokens - i);
      // Allowed logits unchanged; sample by argmax of the masked row.
      int32_t best = -1;
      for (size_t t = 0; t < logits.size(); ++t) {
        if (std::isinf(logits[t])) continue;
        EXPECT_EQ(logits[t], before[t]);
        if (best < 0 || logits[t] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(t);
      }
      ASSERT_GE(best, 0) << "nothing allowed after " << out;
      ASSERT_TRUE(c.accept(best).is_ok());
      if (best == 256) stopped = true;
      else out += vocab->bytes(best);
    }
    EXPECT_TRUE(stopped) << "run " << run << " did not finish within " << max_tokens << ": " << out;
    EXPECT_TRUE(accepts(g, out)) << out;
    ojson parsed = ojson::parse(out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << out;
    EXPECT_TRUE(parsed.contains("name") && parsed["name"].is_string() && parsed["ok"].is_boolean()) << out;
  }
  // A token the mask refused is refused by accept().
  Constraint c(vocab, g);
  EXPECT_FALSE(c.accept('x').is_ok());
}

}  // namespace
}  // namespace sb::constrain
