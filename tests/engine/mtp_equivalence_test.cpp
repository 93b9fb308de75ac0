// MTP speculation changes no bit (engine/mtp_drafter.h): with the MTP head
// drafting, every response equals the same request with speculation off and
// the bank bypassed, tokens, logprobs and top alternatives bit for bit:
// greedy and seeded, 1 and 4 in flight, adaptive and fixed depth, cold and
// restored from the bank (RAM, and SSD after a restart). A restored
// conversation drafts exactly the tokens and head logits a cold one drafts
// (the head's keys and values over the prompt are a state component the
// bank stores, model/model.h), at restore points either side of a block
// edge; a restored State with the head's rows or carried row damaged drafts
// otherwise. auto means mtp on a checkpoint with a head.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "bank/bank.h"
#include "bank/bank_factory.h"
#include "bank/ram_tier.h"
#include "engine/engine.h"
#include "engine/mtp_drafter.h"
#include "runtime/cpu/backend.h"
#include "server/protocols/decoding_rules.h"
#include "tests/engine/equivalence.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

constexpr uint32_t kB = 64;

void with_head(ModelConfig* c) { c->mtp_layers = 1; }

const Model& head_model() {
  static const std::unique_ptr<Model> model =
      testing::load_model(testing::tiny_checkpoint(Arch::kQwen3Next, 7, DType::kBF16, "_mtp", with_head));
  return *model;
}

// qwen4exp's head: its own QSA layer and mixers (docs/model-spec.md 7.7).
const Model& qwen4exp_head_model() {
  static const std::unique_ptr<Model> model =
      testing::load_model(testing::tiny_checkpoint(Arch::kQwen4Exp, 7, DType::kBF16, "_mtp", with_head));
  return *model;
}

EngineOptions engine_options(int64_t batch_tokens) {
  EngineOptions o = testing::block_options(kB);
  o.batch_tokens = batch_tokens;
  return o;
}

struct Fixture : testing::RamBankEngine<> {
  explicit Fixture(const Model& m = head_model(), int64_t batch_tokens = 512)
      : RamBankEngine(m, engine_options(batch_tokens)) {}
};

// Two and a half blocks of prompt, so that a second run restores; even
// requests greedy, odd ones seeded.
std::vector<CompletionRequest> make_requests(int64_t vocab) {
  std::vector<CompletionRequest> out;
  for (uint64_t i = 0; i < 4; ++i) {
    std::mt19937_64 rng(300 + i);
    CompletionRequest r;
    for (int k = 0; k < 2 * static_cast<int>(kB) + 40; ++k)
      r.prompt.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
    r.max_tokens = 20;
    r.top_logprobs = 2;
    if (i % 2 == 1) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 40;
      r.sampling.seed = 11 + i;
    }
    out.push_back(std::move(r));
  }
  return out;
}

CompletionResult run(const Engine& engine, CompletionRequest r, SpeculativeMode mode, CacheMode cache) {
  r.speculative.mode = mode;
  r.cache_mode = cache;
  CompletionResult out;
  EXPECT_TRUE(engine.complete(r, &out).is_ok());
  return out;
}

// What the MTP drafter proposed over a request: tokens (-1 ends a call) and
// the head's logits of every depth.
struct Drafts {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  bool operator==(const Drafts&) const = default;
};

// The MTP drafter, recording what it proposes.
class RecordingDrafter final : public Drafter {
 public:
  RecordingDrafter(const Model& model, Drafts* drafts) : inner_(model), drafts_(drafts) {}
  void draft(const DraftContext& context, int max_tokens, std::vector<int32_t>* out) override {
    const size_t from = out->size();
    inner_.draft(context, max_tokens, out);
    drafts_->tokens.insert(drafts_->tokens.end(), out->begin() + static_cast<std::ptrdiff_t>(from), out->end());
    drafts_->tokens.push_back(-1);  // a call's end
    for (const MtpOutput& o : inner_.last_outputs())
      drafts_->logits.insert(drafts_->logits.end(), o.logits.begin(), o.logits.end());
  }

 private:
  MtpDrafter inner_;
  Drafts* drafts_;
};

// The request with a recording MTP drafter, depth 3.
CompletionRequest recorded(const Model& model, CompletionRequest r, Drafts* drafts) {
  r.speculative.draft_max = 3;
  r.speculative.adaptive = false;
  r.make_drafter = [&model, drafts] { return std::make_unique<RecordingDrafter>(model, drafts); };
  return r;
}

// A greedy request whose prompt has `n` tokens.
CompletionRequest prompt_of(int64_t vocab, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  CompletionRequest r;
  for (int k = 0; k < n; ++k) r.prompt.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
  r.max_tokens = 16;
  r.top_logprobs = 2;
  return r;
}

// A request run plain (speculation off, the bank bypassed), then twice with
// the recording MTP drafter through the bank: cold, then restored.
struct ColdAndWarm {
  CompletionResult plain, cold, warm;
  Drafts cold_drafts, warm_drafts;
};
ColdAndWarm run_cold_then_warm(const Fixture& f, const CompletionRequest& base) {
  ColdAndWarm r;
  r.plain = run(*f.engine, base, SpeculativeMode::kOff, CacheMode::kBypass);
  r.cold = run(*f.engine, recorded(f.model, base, &r.cold_drafts), SpeculativeMode::kMtp, CacheMode::kDefault);
  r.warm = run(*f.engine, recorded(f.model, base, &r.warm_drafts), SpeculativeMode::kMtp, CacheMode::kDefault);
  return r;
}

size_t component(const State& s, const std::string& name) {
  for (size_t c = 0; c < s.n_components(); ++c)
    if (s.schema().components[c].name == name) return c;
  ADD_FAILURE() << "no component " << name;
  return 0;
}

TEST(MtpEquivalence, MtpDraftsEqualPlainDecodingBitForBit) {
  Fixture f;
  const std::vector<CompletionRequest> requests = make_requests(f.model.vocab_size());
  std::vector<CompletionResult> plain;
  for (const CompletionRequest& r : requests)
    plain.push_back(run(*f.engine, r, SpeculativeMode::kOff, CacheMode::kBypass));
  for (int fixed : {0, 3})
    for (int in_flight : {1, 4}) {
      SCOPED_TRACE((fixed ? "depth 3 fixed, " : "adaptive, ") + std::to_string(in_flight) + " in flight");
      std::mutex mu;
      std::atomic<size_t> next{0};
      SpeculativeRecord total;
      int restored = 0;
      auto worker = [&] {
        for (size_t i; (i = next.fetch_add(1)) < requests.size();) {
          CompletionRequest r = requests[i];
          r.speculative.draft_max = fixed ? fixed : 4;
          r.speculative.adaptive = fixed == 0;
          const CompletionResult got = run(*f.engine, r, SpeculativeMode::kMtp, CacheMode::kDefault);
          std::lock_guard<std::mutex> lock(mu);
          EXPECT_EQ(testing::compare_results(got, plain[i]), "") << "request " << i;
          EXPECT_EQ(got.speculative.mode, "mtp");
          restored += got.restore.restore_point > 0;
          total.drafted += got.speculative.drafted, total.accepted += got.speculative.accepted;
          total.steps += got.speculative.steps, total.tokens += got.speculative.tokens;
        }
      };
      std::vector<std::thread> threads;
      for (int t = 0; t < in_flight; ++t) threads.emplace_back(worker);
      for (auto& t : threads) t.join();
      std::printf("mtp %s, %d in flight: %lld drafted, acceptance %.2f, %.2f tokens/step, %d restored\n",
                  fixed ? "depth 3" : "adaptive", in_flight, static_cast<long long>(total.drafted), total.acceptance(),
                  total.tokens_per_step(), restored);
      EXPECT_GT(total.drafted, 0);  // not vacuous: drafts were verified
      if (fixed) {
        EXPECT_GE(total.drafted, 4 * 3);
      }
    }
}

TEST(MtpEquivalence, ARestoredConversationDraftsWhatAColdOneDrafts) {
  Fixture f;
  std::vector<CompletionRequest> requests = make_requests(f.model.vocab_size());
  // Prompts ending one token before and one after a block edge: restored at
  // the edge before (63 tokens prefilled) and at the edge (1 token).
  for (int n : {2 * static_cast<int>(kB) - 1, 2 * static_cast<int>(kB) + 1})
    requests.push_back(prompt_of(f.model.vocab_size(), n, 900 + n));
  for (const CompletionRequest& base : requests) {
    const int64_t n = static_cast<int64_t>(base.prompt.size());
    SCOPED_TRACE("prompt of " + std::to_string(n));
    const auto [plain, cold, warm, cold_drafts, warm_drafts] = run_cold_then_warm(f, base);
    EXPECT_EQ(cold.restore.restore_point, 0);
    EXPECT_EQ(warm.restore.restore_point, (n - 1) / kB * kB);
    EXPECT_EQ(testing::compare_results(cold, plain), "");
    EXPECT_EQ(testing::compare_results(warm, plain), "");
    EXPECT_GT(cold_drafts.tokens.size(), 10u);
    EXPECT_GT(cold_drafts.logits.size(), 0u);
    EXPECT_TRUE(cold_drafts == warm_drafts);
  }
}

// The negative: a restore that damages the head's last stored key rows, or
// its carried hidden row, drafts otherwise than a cold run (so the equality
// above can fail); the responses still equal plain decoding (a draft is a
// proposal only).
TEST(MtpEquivalence, ADamagedHeadStateDraftsOtherwise) {
  for (const char* name : {"mtp.k", "mtp.hidden"}) {
    SCOPED_TRACE(name);
    Fixture f;
    const std::string target = name;
    f.engine->set_test_hooks(EngineTestHooks{[target](State& s) {
      std::vector<uint8_t>& bytes = s.storage(component(s, target));
      std::fill(bytes.end() - static_cast<std::ptrdiff_t>(std::min<size_t>(bytes.size(), 256)), bytes.end(), 0);
    }});
    const CompletionRequest base = prompt_of(f.model.vocab_size(), 2 * static_cast<int>(kB) + 1, 77);
    const auto [plain, cold, warm, cold_drafts, warm_drafts] = run_cold_then_warm(f, base);
    EXPECT_GT(warm.restore.restore_point, 0);
    EXPECT_EQ(testing::compare_results(cold, plain), "");
    EXPECT_EQ(testing::compare_results(warm, plain), "");
    EXPECT_FALSE(cold_drafts == warm_drafts);
  }
}

// The engine's prefill chunks (a step's batch_tokens: the whole prompt, or
// chunks on and off the 64-token grid) change no draft.
TEST(MtpEquivalence, DraftsDoNotDependOnThePrefillSplit) {
  const CompletionRequest base = prompt_of(head_model().vocab_size(), 2 * static_cast<int>(kB) + 40, 41);
  Drafts want;
  CompletionResult plain;
  for (int64_t batch_tokens : {512, 64, 50, 9}) {
    SCOPED_TRACE("batch_tokens " + std::to_string(batch_tokens));
    Fixture f(head_model(), batch_tokens);
    Drafts drafts;
    const CompletionResult got =
        run(*f.engine, recorded(f.model, base, &drafts), SpeculativeMode::kMtp, CacheMode::kBypass);
    if (batch_tokens == 512) {
      want = drafts;
      plain = got;
      EXPECT_GT(want.tokens.size(), 10u);
      continue;
    }
    EXPECT_EQ(testing::compare_results(got, plain), "");
    EXPECT_TRUE(drafts == want);
  }
}

// A server restarted between requests restores from the SSD tier: the head's
// components come back from disk, drafts and responses as a cold run's.
void expect_drafts_after_a_restart_from_ssd_equal_cold_ones(const Model& model) {
  testing::TempDir dir(/*in_memory=*/true);
  BankOptions o;
  o.ram_bytes = 64ull << 20;
  o.ssd_mode = SsdMode::kOn;
  o.ssd_dir = dir.bank();
  for (int n : {2 * static_cast<int>(kB) - 1, 2 * static_cast<int>(kB) + 1}) {
    SCOPED_TRACE("prompt of " + std::to_string(n));
    const CompletionRequest base = prompt_of(model.vocab_size(), n, 500 + n);
    Drafts cold_drafts, warm_drafts;
    CompletionResult plain, cold, warm;
    {
      testing::EngineStack server(model, o, kB, 2 * kB);
      ASSERT_NE(server.engine, nullptr);
      plain = run(*server.engine, base, SpeculativeMode::kOff, CacheMode::kBypass);
      cold = run(*server.engine, recorded(model, base, &cold_drafts), SpeculativeMode::kMtp, CacheMode::kDefault);
    }
    {
      testing::EngineStack server(model, o, kB, 2 * kB);
      ASSERT_NE(server.engine, nullptr);
      warm = run(*server.engine, recorded(model, base, &warm_drafts), SpeculativeMode::kMtp, CacheMode::kDefault);
    }
    EXPECT_EQ(cold.restore.restore_point, 0);
    EXPECT_EQ(warm.restore.restore_point, (n - 1) / kB * kB);
    EXPECT_STREQ(warm.restore.mode.name(), "ssd");
    EXPECT_EQ(testing::compare_results(cold, plain), "");
    EXPECT_EQ(testing::compare_results(warm, plain), "");
    EXPECT_GT(cold_drafts.tokens.size(), 10u);
    EXPECT_TRUE(cold_drafts == warm_drafts);
  }
}

TEST(MtpEquivalence, DraftsAfterARestartFromSsdEqualColdOnes) {
  expect_drafts_after_a_restart_from_ssd_equal_cold_ones(head_model());
}

TEST(MtpEquivalence, Qwen4ExpDraftsAfterARestartFromSsdEqualColdOnes) {
  expect_drafts_after_a_restart_from_ssd_equal_cold_ones(qwen4exp_head_model());
}

// A head that can draft token 0 only (a draft vocabulary of one id), and a
// logit bias that makes the target emit 0 always, or 0 or 1: drafts are
// accepted, several tokens a step, cold and restored, and every result still
// equals plain decoding's.
void expect_accepted_drafts_equal_plain_decoding(Arch arch) {
  RuntimeOptions ro;
  ro.mtp_draft_vocab = 1;
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::load(testing::tiny_checkpoint(arch, 7, DType::kBF16, "_mtp", with_head), ro,
                          cpu_kernels_factory(), &model)
                  .is_ok());
  Fixture f(*model);
  std::vector<CompletionRequest> requests = make_requests(model->vocab_size());
  for (size_t i = 0; i < requests.size(); ++i) {
    DecodingRules rules;
    rules.logit_bias.emplace_back(0, 60.0f);
    if (i >= 2) rules.logit_bias.emplace_back(1, 60.0f);
    auto shared = std::make_shared<const DecodingRules>(std::move(rules));
    requests[i].make_processor = [shared] { return shared->make(); };
  }
  SpeculativeRecord total;
  for (int pass = 0; pass < 2; ++pass)  // cold, then restored
    for (size_t i = 0; i < requests.size(); ++i) {
      const CompletionResult plain = run(*f.engine, requests[i], SpeculativeMode::kOff, CacheMode::kBypass);
      CompletionRequest r = requests[i];
      r.speculative.draft_max = 3;
      r.speculative.adaptive = false;
      const CompletionResult got = run(*f.engine, r, SpeculativeMode::kMtp, CacheMode::kDefault);
      EXPECT_EQ(testing::compare_results(got, plain), "") << "pass " << pass << " request " << i;
      EXPECT_EQ(got.restore.restore_point > 0, pass == 1);
      total.drafted += got.speculative.drafted, total.accepted += got.speculative.accepted;
      total.steps += got.speculative.steps, total.tokens += got.speculative.tokens;
    }
  std::printf("mtp with accepted drafts: %lld drafted, acceptance %.2f, %.2f tokens/step\n",
              static_cast<long long>(total.drafted), total.acceptance(), total.tokens_per_step());
  EXPECT_GT(total.acceptance(), 0.3);
  EXPECT_LT(total.acceptance(), 1.0);
  EXPECT_GT(total.tokens_per_step(), 1.5);
}

TEST(MtpEquivalence, AcceptedDraftsEqualPlainDecodingToo) { expect_accepted_drafts_equal_plain_decoding(Arch::kQwen3Next); }

TEST(MtpEquivalence, Qwen4ExpAcceptedDraftsEqualPlainDecodingToo) {
  expect_accepted_drafts_equal_plain_decoding(Arch::kQwen4Exp);
}

// qwen4exp, greedy and seeded, and a prompt just past a block edge (every
// prompt here is past the tiny preset's indexer budget of 16 tokens): cold
// and restored responses equal plain decoding, a restored conversation
// drafts what a cold one drafts, and one whose head pooled keys or carried
// streams were damaged drafts otherwise.
TEST(MtpEquivalence, Qwen4ExpDraftsEqualPlainDecodingAndRestoreAsCold) {
  Fixture f(qwen4exp_head_model());
  std::vector<CompletionRequest> requests = make_requests(f.model.vocab_size());
  requests.resize(2);
  requests.push_back(prompt_of(f.model.vocab_size(), 2 * static_cast<int>(kB) + 1, 903));
  for (const CompletionRequest& base : requests) {
    const int64_t n = static_cast<int64_t>(base.prompt.size());
    SCOPED_TRACE("prompt of " + std::to_string(n));
    const auto [plain, cold, warm, cold_drafts, warm_drafts] = run_cold_then_warm(f, base);
    EXPECT_EQ(warm.restore.restore_point, (n - 1) / kB * kB);
    EXPECT_EQ(testing::compare_results(cold, plain), "");
    EXPECT_EQ(testing::compare_results(warm, plain), "");
    EXPECT_GT(cold_drafts.tokens.size(), 10u);
    EXPECT_TRUE(cold_drafts == warm_drafts);
  }
  // Every pooled key of the head (its top-k selection reads them all), or
  // the carried streams' last bytes.
  for (auto [name, bytes_from_end] : {std::pair<const char*, size_t>{"mtp.index_pooled", SIZE_MAX}, {"mtp.hidden", 256}}) {
    SCOPED_TRACE(name);
    Fixture damaged(qwen4exp_head_model());
    const std::string target = name;
    const size_t span = bytes_from_end;
    damaged.engine->set_test_hooks(EngineTestHooks{[target, span](State& s) {
      std::vector<uint8_t>& bytes = s.storage(component(s, target));
      std::fill(bytes.end() - static_cast<std::ptrdiff_t>(std::min(bytes.size(), span)), bytes.end(), uint8_t{0x3f});
    }});
    const auto [plain, cold, warm, cold_drafts, warm_drafts] = run_cold_then_warm(damaged, requests.back());
    EXPECT_GT(warm.restore.restore_point, 0);
    EXPECT_EQ(testing::compare_results(warm, plain), "");
    EXPECT_FALSE(cold_drafts == warm_drafts);
  }
}

TEST(MtpEquivalence, AutoMeansMtpWithAHeadAndNgramWithout) {
  Fixture f;
  CompletionRequest r = make_requests(f.model.vocab_size()).front();
  const CompletionResult with_head = run(*f.engine, r, SpeculativeMode::kAuto, CacheMode::kBypass);
  EXPECT_EQ(with_head.speculative.mode, "mtp");
  EXPECT_GT(with_head.speculative.drafted, 0);
  const Model& none = testing::shared_model(Arch::kQwen3Next);
  EXPECT_FALSE(none.has_mtp());
  std::unique_ptr<Engine> engine;
  ASSERT_TRUE(Engine::create(none, nullptr, EngineOptions{}, &engine).is_ok());
  const CompletionResult without = run(*engine, r, SpeculativeMode::kAuto, CacheMode::kBypass);
  EXPECT_EQ(without.speculative.mode, "ngram");
  CompletionResult out;
  r.speculative.mode = SpeculativeMode::kMtp;
  const Status s = engine->complete(r, &out);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("MTP head"), std::string::npos) << s.message();
  EngineOptions o;
  o.speculative = SpeculativeMode::kMtp;
  EXPECT_FALSE(Engine::create(none, nullptr, o, &engine).is_ok());
  EXPECT_TRUE(Engine::create(f.model, nullptr, o, &engine).is_ok());
}

}  // namespace
}  // namespace sb
