// Speculative decoding changes no bit (engine/speculation.h): with n-gram
// drafts and with the oracle drafter (a recorded run's tokens, a chosen share
// corrupted, so acceptance is forced high or low), every response equals the
// same request with speculation off, tokens, logprobs and top alternatives
// bit for bit: greedy and seeded sampling, streamed and not, 1, 4 and 8
// requests in flight, restored from the bank, and under a JSON schema (the
// grammar mask of each verified row is the one plain decoding applies after
// the tokens before it). Negative: keeping the state of rejected rows (the
// test hook that skips the rollback) makes the comparison fail.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "bank/bank.h"
#include "bank/ram_tier.h"
#include "constrain/constraint.h"
#include "engine/engine.h"
#include "server/backend/vocabulary.h"
#include "server/protocols/decoding_rules.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"
#include "tokenizer/tokenizer.h"

namespace sb {
namespace {

constexpr uint32_t kB = 64;

EngineOptions engine_options() {
  EngineOptions o = testing::block_options(kB);
  o.verify_row_cost = DraftControl::kRowCost;  // depth choices (and the bounds below) independent of timing
  return o;
}

struct Fixture : testing::RamBankEngine<> {
  explicit Fixture(EngineTestHooks hooks = {})
      : RamBankEngine(testing::shared_model(Arch::kQwen3Next), engine_options()) {
    engine->set_test_hooks(std::move(hooks));
  }
};

// Prompts that repeat themselves (what n-gram drafts feed on), two and a
// half blocks long so that a second run restores from the bank. The tiny
// random model's own output never repeats, so half the requests carry a
// logit bias towards four of the prompt's tokens: their output repeats, the
// n-gram drafter proposes, and the model's choice among the four rejects
// some of it.
std::vector<CompletionRequest> make_requests(int64_t vocab) {
  std::vector<CompletionRequest> out;
  for (uint64_t i = 0; i < 8; ++i) {
    std::mt19937_64 rng(100 + i);
    std::vector<int32_t> piece(24);
    for (auto& t : piece) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    CompletionRequest r;
    for (int rep = 0; rep < 6; ++rep) r.prompt.insert(r.prompt.end(), piece.begin(), piece.end());
    for (int k = 0; k < 10; ++k) r.prompt.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
    r.max_tokens = 24;
    if (i % 4 >= 2) {
      DecodingRules rules;
      for (int k = 0; k < 4; ++k) rules.logit_bias.emplace_back(piece[k], 60.0f);
      auto shared = std::make_shared<const DecodingRules>(std::move(rules));
      r.make_processor = [shared] { return shared->make(); };
    }
    r.top_logprobs = 2;
    if (i % 2 == 1) {  // seeded sampling
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 40;
      r.sampling.seed = 7 + i;
    }
    out.push_back(std::move(r));
  }
  return out;
}

CompletionResult plain_run(const Engine& engine, CompletionRequest r) {
  r.speculative.mode = SpeculativeMode::kOff;
  r.cache_mode = CacheMode::kBypass;
  CompletionResult out;
  EXPECT_TRUE(engine.complete(r, &out).is_ok());
  EXPECT_EQ(out.speculative.drafted, 0);
  return out;
}

// How a variant drafts: n-gram, or the oracle from the plain run's tokens.
struct Variant {
  std::string name;
  double corrupt = -1;  // < 0: n-gram; else the oracle's corrupted share
  int draft_max = 4;
  bool adaptive = true;
};

void set_variant(const Variant& v, const CompletionResult& plain, int64_t vocab, uint64_t seed, CompletionRequest* r) {
  r->speculative.mode = SpeculativeMode::kNgram;
  r->speculative.draft_max = v.draft_max;
  r->speculative.adaptive = v.adaptive;
  if (v.corrupt < 0) return;
  std::vector<int32_t> recorded;
  for (const GeneratedToken& g : plain.tokens) recorded.push_back(g.token);
  const double corrupt = v.corrupt;
  r->make_drafter = [=] { return std::make_unique<OracleDrafter>(recorded, corrupt, seed, vocab); };
}

struct Outcome {
  int mismatches = 0, restored = 0;
  SpeculativeRecord total;
  std::vector<std::string> failures;
};

// Runs every request of `requests` with `in_flight` of them at once and
// compares each with its plain twin; odd requests stream.
Outcome run_against_plain(const Engine& engine, const std::vector<CompletionRequest>& requests,
                          const std::vector<CompletionResult>& plain, const Variant& v, int in_flight) {
  Outcome outcome;
  std::mutex mu;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < requests.size();) {
      CompletionRequest r = requests[i];
      set_variant(v, plain[i], engine.model().vocab_size(), 31 + i, &r);
      std::vector<int32_t> streamed;
      if (i % 2 == 1) r.on_token = [&streamed](const GeneratedToken& g) { return streamed.push_back(g.token), true; };
      CompletionResult got;
      const Status s = engine.complete(r, &got);
      std::string why = s.is_ok() ? testing::compare_results(got, plain[i]) : s.to_string();
      if (why.empty() && i % 2 == 1) {
        std::vector<int32_t> returned;
        for (const GeneratedToken& g : got.tokens) returned.push_back(g.token);
        if (returned != streamed) why = "the streamed tokens differ from the returned ones";
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!why.empty()) {
        ++outcome.mismatches;
        outcome.failures.push_back(v.name + " request " + std::to_string(i) + ": " + why);
      }
      outcome.restored += got.restore.restore_point > 0;
      SpeculativeRecord& t = outcome.total;
      t.steps += got.speculative.steps, t.tokens += got.speculative.tokens;
      t.drafted += got.speculative.drafted, t.accepted += got.speculative.accepted;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < in_flight; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  return outcome;
}

TEST(SpeculativeEquivalence, EveryDrafterEqualsPlainDecodingBitForBit) {
  Fixture f;
  const int64_t V = f.model.vocab_size();
  const std::vector<CompletionRequest> requests = make_requests(V);
  std::vector<CompletionResult> plain;
  for (const CompletionRequest& r : requests) {
    plain.push_back(plain_run(*f.engine, r));
    CompletionRequest publish = r;  // puts the prompt's blocks in the bank
    publish.speculative.mode = SpeculativeMode::kOff;
    CompletionResult published;
    ASSERT_TRUE(f.engine->complete(publish, &published).is_ok());
  }
  const Variant variants[] = {
      {"ngram"}, {"oracle 0.9", 0.1}, {"oracle 0.3", 0.7}, {"oracle 0.5 depth 3 fixed", 0.5, 3, false}};
  for (const Variant& v : variants)
    for (int in_flight : {1, 4, 8}) {
      SCOPED_TRACE(v.name + ", " + std::to_string(in_flight) + " in flight");
      const Outcome o = run_against_plain(*f.engine, requests, plain, v, in_flight);
      EXPECT_EQ(o.mismatches, 0) << (o.failures.empty() ? "" : o.failures.front());
      // Every request after the first pass restores its prompt's blocks.
      EXPECT_EQ(o.restored, 8);
      std::printf("%-26s %d in flight: %lld drafted, acceptance %.2f, %.2f tokens/step\n", v.name.c_str(), in_flight,
                  static_cast<long long>(o.total.drafted), o.total.acceptance(), o.total.tokens_per_step());
      // Not vacuous: drafts were verified, and the oracle's acceptance follows its corruption.
      EXPECT_GT(o.total.drafted, 0);
      if (v.corrupt >= 0) {
        EXPECT_NEAR(o.total.acceptance(), 1 - v.corrupt, 0.2);
        EXPECT_GT(o.total.tokens_per_step(), 1.0);
      }
    }
}

TEST(SpeculativeEquivalence, AJsonSchemaMasksEveryVerifiedRowAsPlainDecoding) {
  Fixture f;
  const int64_t V = f.model.vocab_size();
  std::unique_ptr<Tokenizer> tokenizer;
  ASSERT_TRUE(Tokenizer::load(testing::tiny_checkpoint(Arch::kQwen3Next, 7), &tokenizer).is_ok());
  std::shared_ptr<constrain::Grammar> grammar;
  const nlohmann::ordered_json schema = {
      {"type", "object"},
      {"properties", {{"name", {{"type", "string"}, {"maxLength", 12}}}, {"n", {{"type", "integer"}}}}},
      {"required", {"name", "n"}},
      {"additionalProperties", false}};
  ASSERT_TRUE(constrain::Grammar::from_json_schema(schema, "schema", &grammar).is_ok());
  DecodingRules rules;
  rules.grammar = grammar;
  rules.vocabulary = make_vocabulary(*tokenizer, V);
  auto shared = std::make_shared<const DecodingRules>(std::move(rules));
  std::vector<CompletionRequest> requests = make_requests(V);
  for (CompletionRequest& r : requests) {
    r.make_processor = [shared] { return shared->make(); };
    r.stop_tokens = tokenizer->stop_tokens();
    r.max_tokens = 32;
  }
  std::vector<CompletionResult> plain;
  for (const CompletionRequest& r : requests) plain.push_back(plain_run(*f.engine, r));
  for (const Variant& v : {Variant{"ngram"}, Variant{"oracle 0.8", 0.2}, Variant{"oracle 0.4", 0.6}}) {
    SCOPED_TRACE(v.name);
    const Outcome o = run_against_plain(*f.engine, requests, plain, v, 4);
    EXPECT_EQ(o.mismatches, 0) << (o.failures.empty() ? "" : o.failures.front());
    if (v.corrupt >= 0) {
      EXPECT_GT(o.total.accepted, 0);
    }
  }
}

TEST(SpeculativeEquivalence, KeepingRejectedRowsIsCaught) {
  EngineTestHooks hooks;
  hooks.keep_rejected_rows = true;
  Fixture f(hooks);
  const std::vector<CompletionRequest> requests = make_requests(f.model.vocab_size());
  std::vector<CompletionResult> plain;
  for (const CompletionRequest& r : requests) plain.push_back(plain_run(*f.engine, r));
  const Outcome o = run_against_plain(*f.engine, requests, plain, Variant{"oracle 0.5", 0.5}, 4);
  EXPECT_GT(o.mismatches, 0);
}

TEST(SpeculativeEquivalence, BadSettingsAreRefusedByName) {
  Fixture f;
  CompletionRequest r = make_requests(f.model.vocab_size()).front();
  CompletionResult out;
  r.speculative.draft_max = 0;
  Status s = f.engine->complete(r, &out);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("draft_max"), std::string::npos) << s.message();
  r.speculative.draft_max = 4;
  r.speculative.mode = SpeculativeMode::kMtp;
  s = f.engine->complete(r, &out);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("MTP head"), std::string::npos) << s.message();
  EngineOptions o;
  o.draft_max = kMaxDraftTokens + 1;
  std::unique_ptr<Engine> engine;
  EXPECT_FALSE(Engine::create(f.model, nullptr, o, &engine).is_ok());
}

}  // namespace
}  // namespace sb
