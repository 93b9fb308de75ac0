// Batch invariance (model/model.h): a sequence run in one forward
// step with 1..7 others — prefill chunks and decode tokens, different
// lengths, histories, captures and logit rows — gets bit for bit the logits,
// snapshots and State it gets alone, on every architecture.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "tests/util/models.h"
#include "tests/util/state_edit.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

using testing::kAllArchs;
using testing::load_model;
using testing::tiny_checkpoint;

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

bool same_output(const SequenceOutput& a, const SequenceOutput& b) {
  if (a.n_rows != b.n_rows || !same_bits(a.logits, b.logits) || a.snapshots.size() != b.snapshots.size())
    return false;
  for (size_t i = 0; i < a.snapshots.size(); ++i) {
    if (a.snapshots[i].position != b.snapshots[i].position ||
        a.snapshots[i].parts.size() != b.snapshots[i].parts.size())
      return false;
    for (size_t p = 0; p < a.snapshots[i].parts.size(); ++p)
      if (!same_bits(a.snapshots[i].parts[p], b.snapshots[i].parts[p])) return false;
  }
  return true;
}

// One sequence of a random step: a history already consumed, then a decode
// token or a prefill chunk (starting on the grid or not), with captures.
struct Case {
  State state;
  std::vector<int32_t> tokens;
  bool decode = false;
  std::vector<int64_t> capture;
  LogitRows logits = LogitRows::kLast;
  bool use_carry = false;  // the history and the step share a PrefillCarry
  PrefillCarry carry;
};

class BatchInvariance : public ::testing::TestWithParam<std::tuple<Arch, testing::Weights>> {
 protected:
  void SetUp() override { model_ = load_model(testing::model_path(arch(), std::get<1>(GetParam())), 2); }
  Arch arch() const { return std::get<0>(GetParam()); }

  std::vector<int32_t> tokens(std::mt19937& rng, int64_t n) {
    return testing::random_tokens(rng, n, std::min<int64_t>(model_->vocab_size(), testing::kPlainVocab));
  }

  Case random_case(std::mt19937& rng) {
    Case c;
    c.state = model_->new_state();
    const int64_t history = std::uniform_int_distribution<int64_t>(0, 3)(rng) * kGrid +
                            (rng() % 3 == 0 ? std::uniform_int_distribution<int64_t>(1, 63)(rng) : 0);
    c.use_carry = rng() % 2 == 0;
    if (history > 0) {
      PrefillOutput ignored;
      PrefillOptions o;
      if (c.use_carry) o.carry = &c.carry;
      EXPECT_TRUE(model_->prefill(c.state, tokens(rng, history), o, &ignored).is_ok());
    }
    c.decode = history > 0 && rng() % 2 == 0;
    const int64_t n = c.decode ? 1 : std::uniform_int_distribution<int64_t>(1, 150)(rng);
    c.tokens = tokens(rng, n);
    if (!c.decode) {
      for (int64_t p = (history / kGrid + 1) * kGrid; p < history + n; p += kGrid)
        if (rng() % 2) c.capture.push_back(p);
      if (rng() % 2) c.capture.push_back(history + n);
    }
    // Every row's logits only for short chunks: the LM head over the whole
    // vocabulary is most of a tiny model's time.
    const int r = static_cast<int>(rng() % 3);
    c.logits = c.decode ? LogitRows::kLast
               : r == 0 ? LogitRows::kNone
               : r == 1 || n > 16 ? LogitRows::kLast
                                  : LogitRows::kAll;
    return c;
  }

  SequenceStep step_of(Case& c, State* state, PrefillCarry* carry = nullptr) const {
    SequenceStep s;
    s.state = state;
    if (c.use_carry && !c.decode) s.carry = carry;
    s.tokens = c.tokens;
    s.decode = c.decode;
    s.capture_positions = c.capture;
    s.logits = c.logits;
    return s;
  }

  std::unique_ptr<Model> model_;
};

TEST_P(BatchInvariance, EverySequenceGetsTheBitsItGetsAlone) {
  std::mt19937 rng(4321 + static_cast<int>(arch()));
  for (int others = 0; others <= 7; ++others) {
    std::vector<Case> cases;
    for (int i = 0; i <= others; ++i) cases.push_back(random_case(rng));
    // Alone: each on a copy of its state.
    std::vector<State> alone_states;
    std::vector<PrefillCarry> alone_carries;
    std::vector<SequenceOutput> alone;
    alone_states.reserve(cases.size());
    alone_carries.reserve(cases.size());
    for (Case& c : cases) {
      alone_states.push_back(c.state);
      alone_carries.push_back(c.carry);
      std::vector<SequenceOutput> out;
      SequenceStep s = step_of(c, &alone_states.back(), &alone_carries.back());
      ASSERT_TRUE(model_->forward(std::span<const SequenceStep>(&s, 1), &out).is_ok());
      alone.push_back(std::move(out[0]));
    }
    // Together, in a shuffled order.
    std::vector<size_t> order(cases.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<SequenceStep> batch;
    for (size_t i : order) batch.push_back(step_of(cases[i], &cases[i].state, &cases[i].carry));
    std::vector<SequenceOutput> together;
    ASSERT_TRUE(model_->forward(batch, &together).is_ok());
    ASSERT_EQ(together.size(), cases.size());
    for (size_t j = 0; j < order.size(); ++j) {
      const size_t i = order[j];
      EXPECT_TRUE(same_output(together[j], alone[i]))
          << "sequence " << i << " of " << cases.size() << (cases[i].decode ? " (decode)" : " (prefill)");
      EXPECT_TRUE(cases[i].state.bitwise_equal(alone_states[i])) << "state of sequence " << i << " of " << cases.size();
      EXPECT_TRUE(cases[i].state.check_consistent().is_ok());
    }
  }
}

TEST_P(BatchInvariance, DecodingTogetherForManyStepsMatchesDecodingAlone) {
  std::mt19937 rng(77);
  const int n = 5;
  std::vector<State> together, alone;
  std::vector<int32_t> next(n);
  for (int i = 0; i < n; ++i) {
    State s = model_->new_state();
    PrefillOutput ignored;
    ASSERT_TRUE(model_->prefill(s, tokens(rng, 20 + 37 * i), {}, &ignored).is_ok());
    together.push_back(s);
    alone.push_back(s);
    next[i] = tokens(rng, 1)[0];
  }
  // A view of a step's logits outlives the step's outputs (the engine's
  // draw keeps it until the next step).
  StepLogits kept;
  std::vector<float> kept_bits;
  for (int step = 0; step < 6; ++step) {
    std::vector<SequenceStep> batch(n);
    for (int i = 0; i < n; ++i) {
      batch[i].state = &together[i];
      batch[i].tokens = std::span<const int32_t>(&next[i], 1);
      batch[i].decode = true;
    }
    std::vector<SequenceOutput> out;
    ASSERT_TRUE(model_->forward(batch, &out).is_ok());
    EXPECT_TRUE(same_bits(kept, kept_bits)) << "step " << step;
    kept = out[n - 1].logits;
    kept_bits = kept.to_vector();
    // The sequences' rows lie in one buffer, in batch order: none copied out.
    const size_t vocab = static_cast<size_t>(model_->vocab_size());
    for (int i = 0; i < n; ++i) EXPECT_EQ(out[i].logits.data(), out[0].logits.data() + i * vocab) << "sequence " << i;
    for (int i = 0; i < n; ++i) {
      std::vector<float> logits;
      ASSERT_TRUE(model_->decode(alone[i], next[i], &logits).is_ok());
      EXPECT_TRUE(same_bits(out[i].logits, logits)) << "sequence " << i << " step " << step;
      next[i] = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
  }
  for (int i = 0; i < n; ++i) EXPECT_TRUE(together[i].bitwise_equal(alone[i])) << "sequence " << i;
}

// A step of more rows than one pass holds (model/transformer.h,
// kMaxPassRows) runs in passes cut on the grid; every sequence still gets
// its own bits, captures and logit rows included.
TEST_P(BatchInvariance, AStepLongerThanOnePassGivesTheSameBits) {
  std::mt19937 rng(31);
  std::vector<Case> cases(4);
  const int64_t history[4] = {0, 70, 128, 5}, length[4] = {300, 260, 1, 20};
  for (int i = 0; i < 4; ++i) {
    Case& c = cases[i];
    c.state = model_->new_state();
    if (history[i] > 0) {
      PrefillOutput ignored;
      ASSERT_TRUE(model_->prefill(c.state, tokens(rng, history[i]), {}, &ignored).is_ok());
    }
    c.tokens = tokens(rng, length[i]);
    c.decode = length[i] == 1;
    if (i == 0) c.capture = {64, 256, 300};
    if (i == 1) c.capture = {192, 320};
    c.logits = i == 3 ? LogitRows::kAll : LogitRows::kLast;
  }
  std::vector<State> alone_states;
  std::vector<SequenceOutput> alone;
  for (Case& c : cases) {
    alone_states.push_back(c.state);
    std::vector<SequenceOutput> out;
    SequenceStep s = step_of(c, &alone_states.back());
    ASSERT_TRUE(model_->forward(std::span<const SequenceStep>(&s, 1), &out).is_ok());
    alone.push_back(std::move(out[0]));
  }
  std::vector<SequenceStep> batch;
  for (Case& c : cases) batch.push_back(step_of(c, &c.state));
  std::vector<SequenceOutput> together;
  ASSERT_TRUE(model_->forward(batch, &together).is_ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(same_output(together[i], alone[i])) << "sequence " << i;
    EXPECT_TRUE(cases[i].state.bitwise_equal(alone_states[i])) << "state of sequence " << i;
  }
  EXPECT_EQ(together[0].snapshots.size(), 3u);
  EXPECT_EQ(together[3].n_rows, 20);
}

// The comparison above would notice a wrong state: one wrong value in one
// sequence's history changes its logits, and only its own.
TEST_P(BatchInvariance, AWrongStateIsNoticedAndStaysInItsSequence) {
  std::mt19937 rng(5);
  State a = model_->new_state(), b = model_->new_state();
  PrefillOutput ignored;
  auto history = tokens(rng, 70);
  ASSERT_TRUE(model_->prefill(a, history, {}, &ignored).is_ok());
  ASSERT_TRUE(model_->prefill(b, history, {}, &ignored).is_ok());
  State a_ref = a, b_ref = b;
  // One wrong value in one row of the first attention layer of b.
  size_t v = 0;
  while (v < b.n_components() && !b.schema().components[v].name.ends_with(".v")) ++v;
  ASSERT_LT(v, b.n_components());
  ASSERT_FALSE(b.bytes(v).empty());
  const size_t last = testing::stored_values(b, v) - 1;  // the newest key's value: every query sees it
  // Large enough to survive the int8 quantization of activations in a
  // quantized model's products (a small change can round away there).
  testing::set_stored_value(b, v, last, testing::stored_value(b, v, last) + 8.0f);
  const int32_t t[2] = {11, 12};
  SequenceStep sa, sb;
  sa.state = &a;
  sa.tokens = std::span<const int32_t>(t, 1);
  sa.decode = true;
  sb.state = &b;
  sb.tokens = std::span<const int32_t>(t + 1, 1);
  sb.decode = true;
  std::vector<SequenceStep> batch = {sa, sb};
  std::vector<SequenceOutput> out;
  ASSERT_TRUE(model_->forward(batch, &out).is_ok());
  std::vector<float> la, lb;
  ASSERT_TRUE(model_->decode(a_ref, t[0], &la).is_ok());
  ASSERT_TRUE(model_->decode(b_ref, t[1], &lb).is_ok());
  EXPECT_TRUE(same_bits(out[0].logits, la));
  EXPECT_FALSE(same_bits(out[1].logits, lb));
}

TEST_P(BatchInvariance, ABadSequenceFailsTheStepBeforeAnyStateChanges) {
  std::mt19937 rng(9);
  State a = model_->new_state(), b = model_->new_state();
  const State a0 = a, b0 = b;
  auto good = tokens(rng, 10);
  std::vector<int32_t> bad = {1, static_cast<int32_t>(model_->vocab_size())};
  std::vector<SequenceStep> batch(2);
  batch[0].state = &a;
  batch[0].tokens = good;
  batch[1].state = &b;
  batch[1].tokens = bad;
  std::vector<SequenceOutput> out;
  EXPECT_EQ(model_->forward(batch, &out).code(), Code::kInvalidArgument);
  EXPECT_TRUE(a.bitwise_equal(a0));
  EXPECT_TRUE(b.bitwise_equal(b0));
  // The same State twice, and row states asked of a prefill (they are the
  // verify form's, decode rows only), are refused too.
  batch[1].state = &a;
  batch[1].tokens = good;
  EXPECT_EQ(model_->forward(batch, &out).code(), Code::kInvalidArgument);
  batch[1].state = &b;
  VerifyRollback kept;
  batch[1].rollback = &kept;
  EXPECT_EQ(model_->forward(batch, &out).code(), Code::kInvalidArgument);
  EXPECT_TRUE(a.bitwise_equal(a0));
  EXPECT_TRUE(b.bitwise_equal(b0));
}

std::string case_name(const ::testing::TestParamInfo<BatchInvariance::ParamType>& info) {
  const testing::Weights w = std::get<1>(info.param);
  return std::string(arch_name(std::get<0>(info.param))) +
         (w == testing::Weights::kCheckpoint ? "" : std::string("_") + testing::weights_name(w));
}

INSTANTIATE_TEST_SUITE_P(EveryArch, BatchInvariance,
                         ::testing::Combine(::testing::ValuesIn(kAllArchs), ::testing::Values(testing::Weights::kCheckpoint)),
                         case_name);
// Quantized GGUF files made by statebank quantize.
INSTANTIATE_TEST_SUITE_P(Quantized, BatchInvariance,
                         ::testing::Combine(::testing::Values(Arch::kQwen35, Arch::kQwen3Next),
                                            ::testing::Values(testing::Weights::kQ8_0, testing::Weights::kQ4_K_M)),
                         case_name);
// The low-bit mixes (Q2_K with Q3_K, IQ4_NL, IQ4_XS beside the K types).
INSTANTIATE_TEST_SUITE_P(LowBit, BatchInvariance,
                         ::testing::Combine(::testing::Values(Arch::kQwen35),
                                            ::testing::Values(testing::Weights::kQ2_K, testing::Weights::kIQ4_NL,
                                                              testing::Weights::kIQ4_XS)),
                         case_name);

}  // namespace
}  // namespace sb
