// qwen4exp's QSA layers (docs/qsa.md): selection is really sparse, the
// chunked prefill agrees with token-by-token decoding, and verify_state()
// rejects a pooled table that is too long or built from other tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tests/util/models.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

std::vector<int32_t> prompt(int64_t n, uint32_t seed = 4) { return testing::random_tokens(seed, n); }

std::vector<float> last_logits(const Model& m, const std::vector<int32_t>& tokens, State* state = nullptr) {
  State s = m.new_state();
  PrefillOutput out;
  EXPECT_TRUE(m.prefill(s, tokens, {}, &out).is_ok());
  if (state) *state = s;
  return out.logits.to_vector();
}

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * double(a[i] - b[i]), den += double(b[i]) * b[i];
  return std::sqrt(num / den);
}

void make_dense(ModelConfig* c) { c->index_topk_blocks = 1 << 20; }

TEST(SparseAttention, SelectionIsSparseOnceThereAreMoreBlocksThanTopK) {
  // Same seed, same weights; only index_topk_blocks differs.
  auto sparse = testing::load_model(testing::tiny_checkpoint(Arch::kQwen4Exp, 1));
  auto dense = testing::load_model(testing::tiny_checkpoint(Arch::kQwen4Exp, 1, DType::kBF16, "_dense", make_dense));
  ASSERT_EQ(sparse->config().index_topk_blocks, 4);
  // 16 tokens: at most 4 closed blocks, so the sparse layer is exactly dense.
  auto short_prompt = prompt(16);
  auto a = last_logits(*sparse, short_prompt), b = last_logits(*dense, short_prompt);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  // 80 tokens: 20 blocks, 4 selected: the results must differ.
  auto long_prompt = prompt(80);
  EXPECT_GT(rel(last_logits(*sparse, long_prompt), last_logits(*dense, long_prompt)), 1e-3)
      << "selection degenerated to dense attention";
}

// Decode runs the recurrent form of the delta rule, prefill the chunked one,
// so the two agree within rounding (as in split_invariance_test), here over
// 89 decode steps, each selecting its own blocks, past the top-k budget. In
// f32: under bf16 the rounding of 89 recurrent steps alone reaches 1.2e-3
// (qwen4exp tiny), and split_invariance_test's SplitState already holds
// bf16 decode to prefill within 1e-3 over three steps past the budget.
TEST(SparseAttention, ChunkedPrefillAgreesWithTokenByTokenDecode) {
  auto m = testing::load_model(testing::tiny_checkpoint(Arch::kQwen4Exp, 1), 1, Precision::kF32);
  auto tokens = prompt(90);
  auto prefilled = last_logits(*m, tokens);
  State s = m->new_state();
  PrefillOutput first;
  ASSERT_TRUE(m->prefill(s, std::span(tokens).first(1), {}, &first).is_ok());
  std::vector<float> logits;
  for (size_t i = 1; i < tokens.size(); ++i) ASSERT_TRUE(m->decode(s, tokens[i], &logits).is_ok());
  EXPECT_LT(rel(logits, prefilled), 1e-4);
  EXPECT_TRUE(m->verify_state(s).is_ok());
}

size_t component(const Model& m, const std::string& suffix) {
  for (size_t c = 0; c < m.schema().components.size(); ++c) {
    const std::string& n = m.schema().components[c].name;
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) return c;
  }
  ADD_FAILURE() << "no component " << suffix;
  return 0;
}


TEST(PooledTable, LongerThanTheKeysIsRejected) {
  auto m = testing::load_model(testing::tiny_checkpoint(Arch::kQwen4Exp, 1));
  State longer;
  last_logits(*m, prompt(96), &longer);
  State s;
  last_logits(*m, prompt(64), &s);
  ASSERT_TRUE(m->verify_state(s).is_ok());
  const size_t pooled = component(*m, "index_pooled");
  const auto& spec = m->schema().components[pooled];
  EXPECT_EQ(spec.kind, ComponentKind::kPooled);
  EXPECT_EQ(spec.ratio, 4u);
  // The failure of a peer server: K and V cut to the restore point, the
  // pooled table left at the donor's length.
  State bad = s;
  bad.storage(pooled).assign(longer.bytes(pooled).begin(), longer.bytes(pooled).end());
  Status st = m->verify_state(bad);
  EXPECT_EQ(st.code(), Code::kCorruption);
  EXPECT_NE(st.message().find("index_pooled"), std::string::npos) << st.message();
}

TEST(PooledTable, BuiltFromOtherTokensIsRejected) {
  auto m = testing::load_model(testing::tiny_checkpoint(Arch::kQwen4Exp, 1));
  State s, other;
  last_logits(*m, prompt(64, 4), &s);
  last_logits(*m, prompt(64, 5), &other);
  const size_t pooled = component(*m, "index_pooled");
  State bad = s;
  bad.storage(pooled).assign(other.bytes(pooled).begin(), other.bytes(pooled).end());  // right length, wrong conversation
  ASSERT_TRUE(bad.check_consistent().is_ok()) << "lengths alone cannot see this";
  EXPECT_EQ(m->verify_state(bad).code(), Code::kCorruption);
}

}  // namespace
}  // namespace sb
