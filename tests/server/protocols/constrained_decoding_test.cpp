// Constrained decoding end to end in the engine, with a random-weight tiny
// model (so nothing but the constraint makes the output valid) and the real
// Qwen3 vocabulary:
//  - random JSON schemas (objects, arrays, strings with lengths, numbers,
//    integers, booleans, null, enum, const, anyOf, nesting, required,
//    additionalProperties false), sampled runs with short max_tokens: every
//    output parses and validates with ajv (tools/constrain/validate.mjs), an
//    independent validator; SB_CONSTRAINED_RUNS sets the run count (200; the
//    `long` run uses 2000);
//  - penalties and logit_bias change what is sampled, never what is reported;
//  - bank restore equals bypass for a constrained request, and a negative
//    test shows the comparison would notice a wrong state.
#include <gtest/gtest.h>

#include <bit>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "bank/bank.h"
#include "bank/ram_tier.h"
#include "constrain/constraint.h"
#include "server/backend/vocabulary.h"
#include "server/protocols/decoding_rules.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace sb {
namespace {

using ojson = nlohmann::ordered_json;
constexpr uint32_t kB = 64;

struct Fixture {
  Fixture() : model(testing::shared_model(Arch::kQwen3Next)), ram(1ULL << 30), bank({&ram}) {
    EngineOptions o;
    o.block_tokens = kB;
    o.snapshot_every = 2 * kB;
    EXPECT_TRUE(Engine::create(model, &bank, o, &engine).is_ok());
    std::unique_ptr<Tokenizer> tok;
    Status s = Tokenizer::load(testing::tiny_checkpoint(Arch::kQwen3Next, 7), &tok);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    tokenizer = std::move(tok);
    vocabulary = make_vocabulary(*tokenizer, model.vocab_size());
  }
  const Model& model;
  RamTier ram;
  Bank bank;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const constrain::Vocabulary> vocabulary;
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

class SchemaGen {
 public:
  explicit SchemaGen(uint64_t seed) : rng_(seed) {}
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  ojson value_schema(int depth) {
    switch (pick(depth >= 2 ? 8 : 10)) {
      case 0: {
        ojson s = {{"type", "string"}};
        if (pick(2)) s["maxLength"] = 1 + pick(8);
        if (pick(3) == 0) s["minLength"] = 1;
        return s;
      }
      case 1: return {{"type", "integer"}};
      case 2: return {{"type", "number"}};
      case 3: return {{"type", "boolean"}};
      case 4: return {{"type", "null"}};
      case 5: return {{"enum", ojson::array({"red", "green", 7, nullptr})}};
      case 6: return {{"const", pick(2) ? ojson("fixed") : ojson(42)}};
      case 7: return {{"anyOf", ojson::array({value_schema(depth + 1), {{"type", "null"}}})}};
      case 8: {
        ojson s = {{"type", "array"}, {"items", value_schema(depth + 1)}, {"maxItems", 1 + pick(3)}};
        if (pick(2)) s["minItems"] = 1;
        return s;
      }
      default: return object_schema(depth + 1);
    }
  }

  ojson object_schema(int depth) {
    ojson props = ojson::object();
    ojson required = ojson::array();
    int n = 1 + pick(3);
    for (int i = 0; i < n; ++i) {
      std::string name = std::vector<std::string>{"id", "name", "tags", "score", "ok", "city", "n"}[static_cast<size_t>(pick(7))] +
                         std::to_string(i);
      props[name] = value_schema(depth);
      if (pick(3)) required.push_back(name);
    }
    ojson s = {{"type", "object"}, {"properties", props}, {"required", required}};
    if (pick(4)) s["additionalProperties"] = false;
    return s;
  }

  ojson root() { return pick(5) == 0 ? value_schema(1) : object_schema(0); }

 private:
  std::mt19937_64 rng_;
};

std::vector<int32_t> prompt_of(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p(n);
  for (auto& x : p) x = static_cast<int32_t>(rng() % 150000);
  return p;
}

CompletionRequest constrained(const std::shared_ptr<const constrain::Grammar>& g, std::vector<int32_t> prompt,
                              uint64_t seed, int64_t max_tokens, DecodingRules rules = {}) {
  Fixture& f = fixture();
  CompletionRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  r.stop_tokens = f.tokenizer->stop_tokens();
  r.top_logprobs = 2;
  rules.grammar = g;
  rules.vocabulary = f.vocabulary;
  auto shared = std::make_shared<const DecodingRules>(std::move(rules));
  r.make_processor = [shared] { return shared->make(); };
  return r;
}

std::string text_of(const CompletionResult& r) {
  Fixture& f = fixture();
  const std::vector<int32_t> stops = f.tokenizer->stop_tokens();
  std::vector<int32_t> ids;
  for (const auto& t : r.tokens)
    if (std::find(stops.begin(), stops.end(), t.token) == stops.end()) ids.push_back(t.token);
  return f.tokenizer->decode(ids);
}

std::vector<ojson> ajv_validate(const ojson& cases) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  EXPECT_NE(src, nullptr) << "SB_SOURCE_DIR is not set (run through ctest)";
  std::string path = testing::process_temp_dir() + "/constrained_cases.json";
  std::ofstream(path) << cases.dump();
  std::string cmd = std::string("node ") + (src ? src : ".") + "/tools/constrain/validate.mjs " + path;
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<ojson> out;
  char line[65536];
  while (p && std::fgets(line, sizeof line, p)) out.push_back(ojson::parse(line));
  EXPECT_EQ(p ? pclose(p) : -1, 0);
  return out;
}

TEST(ConstrainedDecoding, RandomSchemasEverySampledOutputValidates) {
  Fixture& f = fixture();
  const char* env = std::getenv("SB_CONSTRAINED_RUNS");
  const int runs = env ? std::atoi(env) : 200;
  // Four runs per schema, generated up front; the runs go on two threads
  // (Engine::complete is thread-safe) to keep the test's wall time short.
  SchemaGen gen(2024);
  std::vector<ojson> schemas;
  std::vector<std::shared_ptr<constrain::Grammar>> grammars;
  for (int i = 0; i < (runs + 3) / 4; ++i) {
    schemas.push_back(gen.root());
    grammars.emplace_back();
    Status st = constrain::Grammar::from_json_schema(schemas.back(), "schema", &grammars.back());
    ASSERT_TRUE(st.is_ok()) << schemas.back().dump() << ": " << st.to_string();
  }
  std::vector<CompletionResult> results(static_cast<size_t>(runs));
  std::vector<Status> statuses(static_cast<size_t>(runs));
  auto worker = [&](int first) {
    for (int run = first; run < runs; run += 2) {
      const auto& g = grammars[static_cast<size_t>(run / 4)];
      // Short outputs keep the test fast; the budget keeps them complete.
      const int64_t budget = std::max<int64_t>(g->root()->min_bytes + 2, 16);
      CompletionRequest r = constrained(g, prompt_of(static_cast<uint64_t>(run), 12), static_cast<uint64_t>(run), budget);
      r.cache_mode = CacheMode::kBypass;
      r.top_logprobs = 0;
      statuses[static_cast<size_t>(run)] = f.engine->complete(r, &results[static_cast<size_t>(run)]);
    }
  };
  std::thread other(worker, 1);
  worker(0);
  other.join();
  ojson cases = ojson::array();
  int finished = 0;
  for (int run = 0; run < runs; ++run) {
    ASSERT_TRUE(statuses[static_cast<size_t>(run)].is_ok()) << statuses[static_cast<size_t>(run)].to_string();
    finished += results[static_cast<size_t>(run)].finish_reason == FinishReason::kStop;
    cases.push_back({{"schema", schemas[static_cast<size_t>(run / 4)]}, {"output", text_of(results[static_cast<size_t>(run)])}});
  }
  EXPECT_EQ(finished, runs) << "every run ends with the stop token within max_tokens";
  std::vector<ojson> verdicts = ajv_validate(cases);
  ASSERT_EQ(verdicts.size(), cases.size());
  int valid = 0;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    if (verdicts[i]["valid"] == true) ++valid;
    else ADD_FAILURE() << "run " << i << ": " << verdicts[i]["why"] << "\nschema " << cases[i]["schema"].dump()
                       << "\noutput " << cases[i]["output"].dump();
  }
  std::printf("%d of %d constrained outputs valid (ajv)\n", valid, runs);
}

TEST(ConstrainedDecoding, BankRestoreEqualsBypassWithASchema) {
  Fixture& f = fixture();
  std::shared_ptr<constrain::Grammar> g;
  ojson schema = {{"type", "object"},
                  {"properties", {{"name", {{"type", "string"}, {"maxLength", 12}}}, {"n", {{"type", "integer"}}}}},
                  {"required", {"name", "n"}},
                  {"additionalProperties", false}};
  ASSERT_TRUE(constrain::Grammar::from_json_schema(schema, "schema", &g).is_ok());
  DecodingRules rules;
  rules.presence_penalty = 0.5f;
  rules.frequency_penalty = 0.25f;
  rules.repetition_penalty = 1.2f;
  rules.logit_bias = {{90, 5.0f}, {151645, -2.0f}};
  auto prompt = prompt_of(99, 3 * kB + 17);
  rules.prompt = prompt;
  CompletionRequest r = constrained(g, prompt, 5, 40, rules);
  CompletionResult first, second, bypass;
  ASSERT_TRUE(f.engine->complete(r, &first).is_ok());
  ASSERT_TRUE(f.engine->complete(r, &second).is_ok());
  EXPECT_GT(second.restore.restore_point, 0);
  r.cache_mode = CacheMode::kBypass;
  ASSERT_TRUE(f.engine->complete(r, &bypass).is_ok());
  EXPECT_EQ(testing::compare_results(second, bypass), "");
  EXPECT_EQ(testing::compare_results(first, bypass), "");
  EXPECT_EQ(first.finish_reason, FinishReason::kStop);
  ojson out = ojson::parse(text_of(second), nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << text_of(second);
  EXPECT_TRUE(out["name"].is_string() && out["n"].is_number_integer()) << out.dump();

  // Negative: the same restore with one value of each recurrent state moved
  // by one ulp of bf16 (2^-8 relative; the default bf16 precision can absorb
  // a one-ulp fp32 change in its rounding) must differ from bypass, so the
  // equality above is evidence.
  EngineTestHooks hooks;
  hooks.tamper_restored_state = [](State& st) {
    for (size_t c = 0; c < st.n_components(); ++c)
      if (st.schema().components[c].kind == ComponentKind::kRecurrent && !st.f32(c).empty()) {
        auto& v = st.f32(c)[st.f32(c).size() / 2];
        v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) + 0x10000u);
      }
  };
  f.engine->set_test_hooks(hooks);
  r.cache_mode = CacheMode::kDefault;
  CompletionResult tampered;
  ASSERT_TRUE(f.engine->complete(r, &tampered).is_ok());
  f.engine->set_test_hooks({});
  EXPECT_GT(tampered.restore.restore_point, 0);
  EXPECT_NE(testing::compare_results(tampered, bypass), "");
}

TEST(ConstrainedDecoding, ProcessingChangesTheSampleNeverTheReportedLogprobs) {
  Fixture& f = fixture();
  CompletionRequest plain;
  plain.prompt = prompt_of(5, 20);
  plain.max_tokens = 6;
  plain.top_logprobs = 3;
  plain.cache_mode = CacheMode::kBypass;
  CompletionResult a, b;
  ASSERT_TRUE(f.engine->complete(plain, &a).is_ok());
  // Greedy with a bias that forces token 90 at every step.
  DecodingRules rules;
  rules.logit_bias = {{90, 100.0f}};
  auto shared = std::make_shared<const DecodingRules>(rules);
  CompletionRequest biased = plain;
  biased.max_tokens = 1;
  biased.make_processor = [shared] { return shared->make(); };
  ASSERT_TRUE(f.engine->complete(biased, &b).is_ok());
  ASSERT_EQ(b.tokens.size(), 1u);
  EXPECT_EQ(b.tokens[0].token, 90);
  // The reported distribution is the model's: the same top alternatives as unbiased.
  ASSERT_EQ(a.tokens[0].top.size(), b.tokens[0].top.size());
  for (size_t k = 0; k < a.tokens[0].top.size(); ++k) {
    EXPECT_EQ(a.tokens[0].top[k].token, b.tokens[0].top[k].token);
    EXPECT_EQ(a.tokens[0].top[k].logprob, b.tokens[0].top[k].logprob);
  }
}

}  // namespace
}  // namespace sb
