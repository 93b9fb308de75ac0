// The runtime against an independent naive forward pass (reference_forward.h)
// on every architecture, and one test per rule that reimplementations break:
// breaking the rule in the reference moves its logits far from the runtime's,
// so the comparison would catch the runtime breaking it.
#include <gtest/gtest.h>

#include <random>

#include "tests/runtime/reference_forward.h"
#include "tests/util/models.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

using testing::ReferenceForward;
using testing::Rules;

struct Loaded {
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;
  WeightSet weights;
  std::unique_ptr<Model> model;
};

Loaded load(const std::string& dir) {
  Loaded l;
  EXPECT_TRUE(parse_config(dir, &l.config).is_ok());
  EXPECT_TRUE(Checkpoint::open(dir, &l.checkpoint).is_ok());
  EXPECT_TRUE(WeightSet::bind(*l.checkpoint, l.config, &l.weights).is_ok());
  l.model = testing::load_model(dir);
  return l;
}

std::vector<int32_t> prompt(int64_t n) { return testing::random_tokens(21, n); }

double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  return std::sqrt(num / den);
}

std::vector<float> runtime_logits(const Loaded& l, const std::vector<int32_t>& tokens) {
  State s = l.model->new_state();
  PrefillOutput out;
  EXPECT_TRUE(l.model->prefill(s, tokens, {}, &out).is_ok());
  return out.logits;
}

class Reference : public ::testing::TestWithParam<Arch> {};

// 70 tokens: past one 64-token chunk, and past the qsa layer's top-k (4 blocks
// of 4 tokens), so selection is really sparse.
TEST_P(Reference, RuntimeMatchesTheNaiveForward) {
  Loaded l = load(testing::tiny_checkpoint(GetParam(), 3, DType::kF32));
  auto tokens = prompt(70);
  ReferenceForward ref(l.config, l.weights, Rules{});
  EXPECT_LT(rel_err(runtime_logits(l, tokens), ref.run(tokens)), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(EveryArch, Reference, ::testing::ValuesIn(testing::kAllArchs),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

void expect_rule_matters(Arch arch, Rules broken, const char* rule) {
  Loaded l = load(testing::tiny_checkpoint(arch, 3, DType::kF32));
  auto tokens = prompt(24);
  auto got = runtime_logits(l, tokens);
  ReferenceForward good(l.config, l.weights, Rules{}), bad(l.config, l.weights, broken);
  EXPECT_LT(rel_err(got, good.run(tokens)), 1e-4) << rule;
  EXPECT_GT(rel_err(got, bad.run(tokens)), 1e-2) << "breaking " << rule << " would go unnoticed";
}

TEST(ReferenceRules, Qwen3NextProjectionsAreUngroupedPerKeyHead) {
  Rules r;
  r.ungroup_qwen3_next = false;
  expect_rule_matters(Arch::kQwen3Next, r, "the Qwen3-Next un-grouping");
}

TEST(ReferenceRules, QueryAndGateInterleavePerHead) {
  Rules r;
  r.per_head_query_gate = false;
  expect_rule_matters(Arch::kQwen35, r, "the per-head [query|gate] layout");
}

TEST(ReferenceRules, RopeRotatesOnlyThePartialDims) {
  Rules r;
  r.partial_rope = false;
  expect_rule_matters(Arch::kQwen35, r, "partial RoPE");
}

TEST(ReferenceRules, MoeRenormalisesTheTopK) {
  Rules r;
  r.moe_renormalise_topk = false;
  expect_rule_matters(Arch::kQwen3Next, r, "MoE top-k renormalisation");
  expect_rule_matters(Arch::kQwen35Moe, r, "MoE top-k renormalisation (fused experts)");
}

}  // namespace
}  // namespace sb
