// The byte automaton of compiled grammars: which texts each schema and tool
// syntax accepts and refuses (object keys, required, additionalProperties,
// arrays with bounds, strings with lengths and escapes, numbers and
// integers, enum/const, anyOf, $ref recursion, whitespace gaps, nesting),
// min_rest() against brute force, and Constraint on a byte vocabulary:
// random logits, every run ends complete and valid within max_tokens, and
// allowed logits are never changed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
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
    if (brute >= 0) {
      EXPECT_GE(m.min_rest(), brute) << prefix;
    }
    EXPECT_LT(m.min_rest(), 40) << prefix;  // and not wildly above
  }
}

// A vocabulary of the 256 single bytes plus some multi-byte tokens, stop = 256.

// Issue 34: hostile schemas are a clear error naming where, never a crash
// (unbounded $ref recursion), a wedge (a node re-entered without consuming
// input) or an overflow.
Status compile_error(const ojson& s) {
  std::shared_ptr<Grammar> g;
  return Grammar::from_json_schema(s, "schema", &g);
}

TEST(Grammar, ReferencesThatReachThemselvesWithoutInputAreRefused) {
  const ojson self = {{"$ref", "#"}};
  const ojson cycle = {{"$defs", {{"a", {{"$ref", "#/$defs/b"}}}, {"b", {{"$ref", "#/$defs/a"}}}}}, {"$ref", "#/$defs/a"}};
  const ojson any_self = {{"anyOf", {{{"$ref", "#"}}, {{"type", "string"}}}}};
  // The cycle B -> A -> B is met first through a member of A (input
  // consumed), so only the compiled graph shows it.
  const ojson hidden = {
      {"$defs",
       {{"A", {{"anyOf", {{{"type", "object"}, {"properties", {{"p", {{"$ref", "#/$defs/B"}}}}}}, {{"$ref", "#/$defs/B"}}}}}},
        {"B", {{"anyOf", {{{"$ref", "#/$defs/A"}}, {{"type", "string"}}}}}}}},
      {"$ref", "#/$defs/A"}};
  for (const ojson& s : {self, cycle, any_self, hidden}) {
    Status st = compile_error(s);
    ASSERT_FALSE(st.is_ok()) << s.dump();
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find("reaches itself without consuming input"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().rfind("schema", 0), 0u) << st.message();
  }
  // Recursion through a member or an item consumes input: allowed.
  const ojson list = {{"anyOf", {{{"type", "array"}, {"items", {{"$ref", "#"}}}}, {{"type", "integer"}}}}};
  auto g = schema(list);
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(g, "[1,[2,[]]]"));
  // The same in a tool's parameters.
  ojson tools = {{{"type", "function"},
                  {"function", {{"name", "f"}, {"parameters", {{"anyOf", {{{"$ref", "#"}}, {{"type", "object"}}}}}}}}}};
  std::shared_ptr<Grammar> calls;
  Status st = Grammar::tool_calls(tools, Grammar::CallSyntax::kJson, false, &calls);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("tools[0].function.parameters"), std::string::npos) << st.message();
}

TEST(Grammar, SizeDepthAndAlternativesAreBounded) {
  // Nesting beyond kMaxSchemaDepth.
  ojson deep = {{"type", "string"}};
  for (int i = 0; i < kMaxSchemaDepth + 2; ++i) deep = {{"type", "array"}, {"items", deep}};
  Status st = compile_error(deep);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("deeper than"), std::string::npos) << st.message();
  // 2^20 ways to read one position through nested anyOf (each level shared by $ref).
  ojson defs = ojson::object();
  for (int i = 0; i < 20; ++i) {
    const std::string next = "#/$defs/l" + std::to_string(i + 1);
    defs["l" + std::to_string(i)] = {{"anyOf", {{{"$ref", next}}, {{"$ref", next}}}}};
  }
  defs["l20"] = {{"type", "string"}};
  st = compile_error({{"$defs", defs}, {"$ref", "#/$defs/l0"}});
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("alternatives"), std::string::npos) << st.message();
  // Literal text beyond kMaxLiteralBytes (a 4 MB const took 200 MB before).
  st = compile_error({{"const", std::string(kMaxLiteralBytes + 1, 'x')}});
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("bytes of const"), std::string::npos) << st.message();
  // More nodes than kMaxNodes.
  ojson alts = ojson::array();
  for (size_t i = 0; i < kMaxNodes + 10; ++i) alts.push_back({{"type", "string"}, {"title", std::to_string(i)}});
  st = compile_error({{"anyOf", alts}});
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("grammar nodes"), std::string::npos) << st.message();
}

TEST(Grammar, HugeCountsAreRefusedOrSaturateNeverOverflow) {
  for (const ojson& s : {ojson{{"type", "array"}, {"minItems", int64_t{1} << 62}},
                         ojson{{"type", "string"}, {"minLength", std::numeric_limits<int64_t>::max()}},
                         ojson{{"type", "string"}, {"minLength", std::numeric_limits<uint64_t>::max()}},
                         ojson{{"type", "string"}, {"maxLength", std::numeric_limits<uint64_t>::max()}}}) {
    Status st = compile_error(s);
    EXPECT_FALSE(st.is_ok()) << s.dump();
  }
  // Within the bound, nested minimums multiply beyond int64: the sizes
  // saturate (UBSan checks the arithmetic) and no finite value exists.
  ojson nested = {{"type", "string"}, {"minLength", kMaxMinCount}};
  for (int i = 0; i < 4; ++i) nested = {{"type", "array"}, {"items", nested}, {"minItems", kMaxMinCount}};
  Status st = compile_error(nested);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("no finite valid value"), std::string::npos) << st.message();
  // A huge maximum is no bound at all, and fine.
  auto g = schema({{"type", "string"}, {"maxLength", std::numeric_limits<int64_t>::max()}});
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(g, "\"abc\""));
}

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
      ASSERT_TRUE(c.mask(logits, max_tokens - i).is_ok());
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


TEST(Constraint, MaskWorkIsBoundedAndInterruptible) {
  auto vocab = byte_vocabulary();
  auto g = schema({{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}});
  std::vector<float> logits(vocab->size(), 0.0f);
  {
    Constraint c(vocab, g);
    EXPECT_TRUE(c.mask(logits, 20).is_ok());
  }
  {
    Constraint c(vocab, g, 100);  // far less than one mask needs
    Status st = c.mask(logits, 20);
    EXPECT_EQ(st.code(), Code::kResourceExhausted) << st.to_string();
  }
  {
    Constraint c(vocab, g);
    int calls = 0;
    Status st = c.mask(logits, 20, [&] { return ++calls > 3; });
    EXPECT_EQ(st.code(), Code::kCancelled) << st.to_string();
    EXPECT_EQ(calls, 4);
  }
}

// Issue 47, finding 2: a mask's work was counted in frames entered only, so
// a schema whose masks mostly copy stacks (an anyOf of many alternatives,
// each a deep stack) ran far past what its budget meant. Each first byte of
// a mask copies every live stack whole, so one mask copies at least
// 256 x stacks x depth frames; the meter must count them, and a budget
// below that ends the mask with kResourceExhausted.
TEST(Constraint, StackCopiesCountAgainstTheMaskBudget) {
  auto vocab = byte_vocabulary();
  constexpr int kAlternatives = 100, kDepth = 8;
  ojson alts = ojson::array();
  for (int i = 0; i < kAlternatives; ++i) {
    ojson s = {{"type", "string"}, {"minLength", 100}, {"maxLength", 3000 + i}};
    for (int d = 1; d < kDepth; ++d) s = {{"type", "array"}, {"items", s}};
    alts.push_back(s);
  }
  auto g = schema({{"anyOf", alts}});
  // Into every alternative's string: kDepth - 1 brackets and the quote.
  auto opened = [&](uint64_t max_work) {
    auto c = std::make_unique<Constraint>(vocab, g, max_work);
    for (int d = 1; d < kDepth; ++d) EXPECT_TRUE(c->accept('[').is_ok());
    EXPECT_TRUE(c->accept('"').is_ok());
    return c;
  };
  std::vector<float> logits(vocab->size(), 0.0f);
  const uint64_t copied = uint64_t{256} * kAlternatives * kDepth;
  auto c = opened(Constraint::kMaxMaskWork);
  ASSERT_TRUE(c->mask(logits, 4000).is_ok());
  EXPECT_GE(c->work(), copied) << "the mask's stack copies were not charged";
  // Negative: the same mask under a budget below its copies alone.
  auto tight = opened(copied / 2);
  Status st = tight->mask(logits, 4000);
  EXPECT_EQ(st.code(), Code::kResourceExhausted) << st.to_string();
  EXPECT_NE(st.message().find("matcher steps"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace sb::constrain
