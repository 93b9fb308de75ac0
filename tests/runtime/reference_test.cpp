// The runtime against an independent naive forward pass (reference_forward.h)
// on every architecture, and one test per rule that reimplementations break:
// breaking the rule in the reference moves its logits far from the runtime's,
// so the comparison would catch the runtime breaking it.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "tests/runtime/reference_forward.h"
#include "tests/util/models.h"
#include "tests/util/mtp_drafts.h"
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
  return out.logits.to_vector();
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

// qwen4exp's MTP head against the reference's (spec 7.7; llama.cpp's
// converter does not export this head, docs/xcheck.md). The reference runs
// the trunk and the head over the pairs of a prompt past the indexer's
// budget (the head's own selection drops blocks), then drafts 3 deep from
// the last position as the engine's drafter does: each depth's logits
// within the f32 tolerance and the same draft tokens. Norming each stream of
// the head's hidden row apart (the reading of the sources statebank does
// not follow) moves the drafts far past the tolerance. The head drafts over
// the ids below RuntimeOptions::mtp_draft_vocab: the reference's logits are
// cut to as many.
std::vector<std::vector<double>> reference_drafts(const Loaded& l, const std::vector<int32_t>& tokens, Rules rules,
                                                  int depth, size_t draft_vocab) {
  ReferenceForward r(l.config, l.weights, rules);
  r.bind_head(*l.checkpoint);
  const int64_t W = l.config.hc_count * l.config.hidden_size;
  std::vector<double> prev(W, 0.0), h;
  for (int32_t t : tokens) {
    h = r.next_streams(t);
    r.mtp_step(prev, t);
    prev = h;
  }
  const std::vector<double> last = r.logits_of(h);
  int32_t token = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
  std::vector<std::vector<double>> out;
  for (int d = 0; d < depth; ++d) {
    prev = r.mtp_step(prev, token);
    out.push_back(r.mtp_logits(prev));
    out.back().resize(draft_vocab);
    token = static_cast<int32_t>(std::max_element(out.back().begin(), out.back().end()) - out.back().begin());
  }
  return out;
}

TEST(ReferenceMtp, Qwen4ExpDraftsMatchTheNaiveHead) {
  const Loaded l = load(testing::tiny_checkpoint(Arch::kQwen4Exp, 7, DType::kF32, "_mtp",
                                                 [](ModelConfig* c) { c->mtp_layers = 1; }),
                        Precision::kF32);
  const std::vector<int32_t> tokens = prompt(30);
  State s = l.model->new_state();
  PrefillOutput out;
  ASSERT_TRUE(l.model->prefill(s, tokens, {}, &out).is_ok());
  const auto drafts = testing::draft_logits(*l.model, s, out.stats.back().argmax, 3);
  const auto want = reference_drafts(l, tokens, Rules{}, 3, drafts[0].size());
  ASSERT_EQ(drafts.size(), want.size());
  for (size_t d = 0; d < want.size(); ++d) {
    const double err = rel_err(drafts[d], want[d]);
    EXPECT_LT(err, 1e-4) << "depth " << d + 1;
    EXPECT_EQ(std::max_element(drafts[d].begin(), drafts[d].end()) - drafts[d].begin(),
              std::max_element(want[d].begin(), want[d].end()) - want[d].begin())
        << "depth " << d + 1;
    std::printf("MTP depth %zu: error %.2e\n", d + 1, err);
  }
  Rules broken;
  broken.mtp_one_hidden_norm = false;
  const auto other = reference_drafts(l, tokens, broken, 1, drafts[0].size());
  const double broken_err = rel_err(drafts[0], other[0]);
  EXPECT_GT(broken_err, 3e-4) << "norming each stream apart would go unnoticed";
  std::printf("MTP depth 1 with each stream normed apart: error %.2e\n", broken_err);
}

}  // namespace
}  // namespace sb
