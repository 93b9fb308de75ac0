// The runtime against an independent naive forward pass (reference_forward.h)
// on every architecture, and one test per rule that reimplementations break:
// breaking the rule in the reference moves its logits far from the runtime's,
// so the comparison would catch the runtime breaking it.
#include <gtest/gtest.h>

#include <cstdio>
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

Loaded load(const std::string& dir, Precision precision) {
  Loaded l;
  EXPECT_TRUE(parse_config(dir, &l.config).is_ok());
  EXPECT_TRUE(Checkpoint::open(dir, &l.checkpoint).is_ok());
  EXPECT_TRUE(WeightSet::bind(*l.checkpoint, l.config, &l.weights).is_ok());
  l.model = testing::load_model(dir, 1, precision);
  return l;
}

// Each precision against the double-precision reference on the checkpoint
// dtype it is the default for. f32: the error is fp32 rounding. bf16: the
// reference rounds every product input to bf16 as the precision defines;
// the error left is fp32 rounding, amplified where it moves an input across
// a bf16 rounding boundary (2^-9 relative). Random tiny models are chaotic
// enough that the rounding of bf16 itself, compared against exact inputs,
// moves logits by 0.7% (qwen3) to 70% (a flipped MoE route).
struct PrecisionCase {
  Precision precision;
  DType checkpoint;
  double tolerance;  // relative L2 error of the logits
};
constexpr PrecisionCase kPrecisions[] = {{Precision::kF32, DType::kF32, 1e-4}, {Precision::kBF16, DType::kBF16, 1e-2}};

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

class Reference : public ::testing::TestWithParam<std::tuple<Arch, PrecisionCase>> {};

// 70 tokens: past one 64-token chunk, and past the qsa layer's top-k (4 blocks
// of 4 tokens), so selection is really sparse.
TEST_P(Reference, RuntimeMatchesTheNaiveForward) {
  const auto [arch, pc] = GetParam();
  Loaded l = load(testing::tiny_checkpoint(arch, 3, pc.checkpoint), pc.precision);
  auto tokens = prompt(70);
  // qwen4exp's n-grams read an end-of-sequence token as a cut (spec 7.3).
  if (arch == Arch::kQwen4Exp) tokens[30] = static_cast<int32_t>(l.config.eos_token_id);
  Rules rules;
  rules.bf16_product_inputs = pc.precision == Precision::kBF16;
  ReferenceForward ref(l.config, l.weights, rules);
  const double err = rel_err(runtime_logits(l, tokens), ref.run(tokens));
  EXPECT_LT(err, pc.tolerance);
  std::printf("%s %s: relative error %.2e\n", arch_name(arch), precision_name(pc.precision), err);
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Arch, PrecisionCase>>& info) {
  return std::string(arch_name(std::get<0>(info.param))) + "_" + precision_name(std::get<1>(info.param).precision);
}

INSTANTIATE_TEST_SUITE_P(EveryArchAndPrecision, Reference,
                         ::testing::Combine(::testing::ValuesIn(testing::kAllArchs), ::testing::ValuesIn(kPrecisions)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Qwen4Exp, Reference,
                         ::testing::Combine(::testing::Values(Arch::kQwen4Exp), ::testing::ValuesIn(kPrecisions)),
                         case_name);

// Breaking a rule moves the reference's logits by far more than either
// precision's tolerance, so the comparison above would catch the runtime
// breaking it.
void expect_rule_matters(Arch arch, Rules broken, const char* rule) {
  for (const PrecisionCase& pc : kPrecisions) {
    Loaded l = load(testing::tiny_checkpoint(arch, 3, pc.checkpoint), pc.precision);
    auto tokens = prompt(24);
    auto got = runtime_logits(l, tokens);
    Rules rules;
    rules.bf16_product_inputs = broken.bf16_product_inputs = pc.precision == Precision::kBF16;
    ReferenceForward good(l.config, l.weights, rules), bad(l.config, l.weights, broken);
    const double good_err = rel_err(got, good.run(tokens)), broken_err = rel_err(got, bad.run(tokens));
    EXPECT_LT(good_err, pc.tolerance) << rule << ", " << precision_name(pc.precision);
    EXPECT_GT(broken_err, 3 * pc.tolerance) << "breaking " << rule << " would go unnoticed under "
                                            << precision_name(pc.precision);
    std::printf("%s, %s: error %.2e, with the rule broken %.2e\n", rule, precision_name(pc.precision), good_err,
                broken_err);
  }
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

TEST(ReferenceRules, Qwen4ExpAddsThePleLayer) {
  Rules r;
  r.qwen4exp_ple = false;
  expect_rule_matters(Arch::kQwen4Exp, r, "qwen4exp's PLE n-gram layer");
}

// 24 tokens: past the tiny preset's budget (4 blocks of 4), so the top-k
// really drops blocks, and attending to all of them instead moves the logits.
TEST(ReferenceRules, Qwen4ExpTopKDropsBlocks) {
  Rules r;
  r.sparse_selection = false;
  expect_rule_matters(Arch::kQwen4Exp, r, "qwen4exp's top-k block selection");
}

}  // namespace
}  // namespace sb
