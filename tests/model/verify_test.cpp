// The verify form of a decode step (model/model.h, SequenceStep): k + 1
// tokens of one sequence in one step give every row the logits of plain
// one-token decode steps, bit for bit, beside other sequences too; rolled
// back to any row (Model::roll_back(), from what the step kept), the State is
// the one plain decoding reaches there. Every architecture (Gated DeltaNet,
// dense and sparse attention).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "model/model.h"
#include "tests/util/models.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

State prefilled(const Model& model, const std::vector<int32_t>& prompt) {
  State state = model.new_state();
  PrefillOutput out;
  EXPECT_TRUE(model.prefill(state, prompt, PrefillOptions{}, &out).is_ok());
  return state;
}

class VerifyTest : public ::testing::TestWithParam<Arch> {};

TEST_P(VerifyTest, RowsEqualPlainDecodeStepsAndRewindUndoesThem) {
  const Model& model = testing::shared_model(GetParam());
  const int64_t V = model.vocab_size();
  // 70 tokens: the verify rows cross no grid point, and (qsa) a pooled block
  // closes inside them (72 = a multiple of the tiny preset's ratio).
  const std::vector<int32_t> prompt = testing::random_tokens(11u, 70, V);
  const std::vector<int32_t> rows = testing::random_tokens(12u, 5, V);

  // Plain decoding, one token a step: logits and the State after each.
  State plain = prefilled(model, prompt);
  std::vector<std::vector<float>> plain_logits;
  std::vector<State> after;
  for (int32_t t : rows) {
    std::vector<float> logits;
    ASSERT_TRUE(model.decode(plain, t, &logits).is_ok());
    plain_logits.push_back(logits);
    after.push_back(plain);
  }

  // The verify form beside another sequence's plain decode step.
  State verified = prefilled(model, prompt), other = prefilled(model, testing::random_tokens(13u, 30, V));
  State other_alone = other;
  std::vector<float> other_logits;
  ASSERT_TRUE(model.decode(other_alone, rows[0], &other_logits).is_ok());
  VerifyRollback kept;
  std::vector<SequenceStep> batch(2);
  batch[0].state = &other;
  batch[0].tokens = std::span<const int32_t>(rows.data(), 1);
  batch[0].decode = true;
  batch[1].state = &verified;
  batch[1].tokens = rows;
  batch[1].decode = true;
  batch[1].logits = LogitRows::kAll;
  batch[1].rollback = &kept;
  std::vector<SequenceOutput> outs;
  ASSERT_TRUE(model.forward(batch, &outs).is_ok());
  EXPECT_TRUE(same_bits(outs[0].logits, other_logits));
  EXPECT_TRUE(other.bitwise_equal(other_alone));
  ASSERT_EQ(outs[1].n_rows, 5);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_TRUE(same_bits(std::span<const float>(outs[1].logits).subspan(i * V, V), plain_logits[i])) << "row " << i;
  EXPECT_TRUE(verified.bitwise_equal(after.back()));
  ASSERT_EQ(kept.rows.size(), 4u);
  const bool delta_net = model.config().lin_n_value_heads > 0;
  for (size_t i = 0; i < kept.rows.size(); ++i) {
    State back = verified;
    VerifyRollback once = kept;  // a rollback uses up what it reads
    ASSERT_TRUE(model.roll_back(back, once, static_cast<int64_t>(i) + 1).is_ok());
    EXPECT_TRUE(back.bitwise_equal(after[i])) << "rolled back to row " << i;
    // The check would notice a rejected row's state kept: the small parts
    // and the truncation alone leave the Gated DeltaNet states of the last row.
    State truncated = verified;
    rewind(truncated, kept.rows[i]);
    if (delta_net) EXPECT_FALSE(truncated.bitwise_equal(after[i])) << "row " << i;
    EXPECT_TRUE(model.verify_state(back).is_ok());
    // And decoding goes on from there as plain decoding does.
    std::vector<float> next, want;
    State plain_next = after[i];
    ASSERT_TRUE(model.decode(back, rows[i + 1], &next).is_ok());
    ASSERT_TRUE(model.decode(plain_next, rows[i + 1], &want).is_ok());
    EXPECT_TRUE(same_bits(next, want));
  }
}

// A rollback of no row, of every row, or of a State that moved since the
// step is refused, the State untouched.
TEST_P(VerifyTest, ARollbackOutOfRangeIsRefused) {
  const Model& model = testing::shared_model(GetParam());
  const std::vector<int32_t> rows = testing::random_tokens(14u, 3, model.vocab_size());
  State state = prefilled(model, testing::random_tokens(15u, 20, model.vocab_size()));
  VerifyRollback kept;
  const SequenceStep step{.state = &state, .tokens = rows, .decode = true, .logits = LogitRows::kAll, .rollback = &kept};
  std::vector<SequenceOutput> outs;
  ASSERT_TRUE(model.forward(std::span<const SequenceStep>(&step, 1), &outs).is_ok());
  const State after = state;
  for (int64_t n : {0, 3}) {
    const Status s = model.roll_back(state, kept, n);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << n;
    EXPECT_NE(s.message().find("verify step of 3"), std::string::npos) << s.message();
    EXPECT_TRUE(state.bitwise_equal(after));
  }
  ASSERT_TRUE(model.roll_back(state, kept, 1).is_ok());
  const State once = state;
  EXPECT_EQ(model.roll_back(state, kept, 1).code(), Code::kInvalidArgument);
  EXPECT_TRUE(state.bitwise_equal(once));
}

TEST_P(VerifyTest, ARollbackIsRefusedForAPrefill) {
  const Model& model = testing::shared_model(GetParam());
  State state = model.new_state();
  const std::vector<int32_t> tokens = {1, 2, 3};
  VerifyRollback kept;
  SequenceStep step;
  step.state = &state;
  step.tokens = tokens;
  step.rollback = &kept;
  std::vector<SequenceOutput> outs;
  const Status s = model.forward(std::span<const SequenceStep>(&step, 1), &outs);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("decode rows only"), std::string::npos) << s.message();
  EXPECT_EQ(state.position(), 0);
}

INSTANTIATE_TEST_SUITE_P(AllArchs, VerifyTest, ::testing::ValuesIn(testing::kAllArchs),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

}  // namespace
}  // namespace sb
