// The runtime's promise to the bank: prefill split on the 64-token grid gives
// bit for bit the logits and state of an unsplit prefill, on every
// architecture and in both precisions (bf16 and f32 products), and captured
// snapshots equal the state of a shorter prefill. A row's bits never depend
// on how many rows share its call or on the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tests/util/models.h"
#include "tests/util/tokens.h"

namespace sb {
namespace {

using testing::kAllArchs;
using testing::load_model;
using testing::tiny_checkpoint;

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n, int64_t vocab) {
  return testing::random_tokens(rng, n, std::min<int64_t>(vocab, testing::kPlainVocab));
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

using testing::Weights;

class SplitInvariance : public ::testing::TestWithParam<std::tuple<Arch, Precision, Weights>> {
 protected:
  Arch arch() const { return std::get<0>(GetParam()); }
  std::unique_ptr<Model> load(int threads = 1) {
    auto m = load_model(testing::model_path(arch(), std::get<2>(GetParam())), threads, std::get<1>(GetParam()));
    EXPECT_NE(m->kernels_name().find(precision_name(std::get<1>(GetParam()))), std::string::npos);
    return m;
  }
};

// The tests of the State's own logic (the carry, captures, decode, bounds)
// depend on the architecture, not on the weights' type: they run on every
// architecture in both precisions, not again on each quantized file.
class SplitState : public SplitInvariance {};

TEST_P(SplitInvariance, RandomGridSplitsGiveIdenticalBits) {
  auto model = load(2);
  std::mt19937 rng(1234 + static_cast<int>(arch()));
  for (int trial = 0; trial < 2; ++trial) {
    const int64_t n = std::uniform_int_distribution<int64_t>(65, 200)(rng);
    auto tokens = random_tokens(rng, n, model->vocab_size());
    State whole = model->new_state();
    PrefillOutput ref;
    PrefillOptions all;
    all.all_logits = true;
    ASSERT_TRUE(model->prefill(whole, tokens, all, &ref).is_ok());

    // Random cut points on the grid.
    std::vector<int64_t> cuts;
    for (int64_t p = kGrid; p < n; p += kGrid)
      if (rng() % 2) cuts.push_back(p);
    cuts.push_back(n);
    State split = model->new_state();
    std::vector<float> logits;
    int64_t at = 0;
    for (int64_t cut : cuts) {
      PrefillOutput part;
      ASSERT_TRUE(model->prefill(split, std::span(tokens).subspan(at, cut - at), all, &part).is_ok());
      logits.insert(logits.end(), part.logits.begin(), part.logits.end());
      at = cut;
    }
    ASSERT_TRUE(split.check_consistent().is_ok());
    EXPECT_TRUE(same_bits(logits, ref.logits)) << "n=" << n << " trial " << trial;
    EXPECT_TRUE(split.bitwise_equal(whole)) << "n=" << n << " trial " << trial;
  }
}

// With a PrefillCarry a prefill may be cut anywhere, not only on the grid:
// logits, State and captured snapshots stay those of one unsplit prefill.
TEST_P(SplitState, SplitsAnywhereWithACarryGiveIdenticalBits) {
  auto model = load(2);
  std::mt19937 rng(4242 + static_cast<int>(arch()));
  for (int trial = 0; trial < 2; ++trial) {
    const int64_t n = std::uniform_int_distribution<int64_t>(70, 230)(rng);
    auto tokens = random_tokens(rng, n, model->vocab_size());
    PrefillOptions all;
    all.all_logits = true;
    all.capture_positions = {64, 128, n};
    State whole = model->new_state();
    PrefillOutput ref;
    ASSERT_TRUE(model->prefill(whole, tokens, all, &ref).is_ok());

    std::vector<int64_t> cuts;
    for (int64_t p = 1 + static_cast<int64_t>(rng() % 40); p < n; p += 1 + static_cast<int64_t>(rng() % 50))
      cuts.push_back(p);
    cuts.push_back(n);
    State split = model->new_state();
    PrefillCarry carry;
    std::vector<float> logits;
    std::vector<RecurrentSnapshot> snaps;
    int64_t at = 0;
    for (int64_t cut : cuts) {
      PrefillOutput part;
      PrefillOptions o = all;
      o.carry = &carry;
      ASSERT_TRUE(model->prefill(split, std::span(tokens).subspan(at, cut - at), o, &part).is_ok());
      logits.insert(logits.end(), part.logits.begin(), part.logits.end());
      for (auto& snap : part.snapshots) snaps.push_back(std::move(snap));
      at = cut;
    }
    ASSERT_TRUE(split.check_consistent().is_ok());
    EXPECT_TRUE(same_bits(logits, ref.logits)) << "n=" << n << " trial " << trial;
    EXPECT_TRUE(split.bitwise_equal(whole)) << "n=" << n << " trial " << trial;
    ASSERT_EQ(snaps.size(), ref.snapshots.size());
    for (size_t i = 0; i < snaps.size(); ++i) {
      EXPECT_EQ(snaps[i].position, ref.snapshots[i].position);
      for (size_t p = 0; p < snaps[i].parts.size(); ++p)
        EXPECT_TRUE(same_bits(snaps[i].parts[p], ref.snapshots[i].parts[p])) << "snapshot " << i << " part " << p;
    }
    // Decoding on from the split State gives the unsplit one's bits too.
    std::vector<float> a, b;
    ASSERT_TRUE(model->decode(split, tokens[0], &a).is_ok());
    ASSERT_TRUE(model->decode(whole, tokens[0], &b).is_ok());
    EXPECT_TRUE(same_bits(a, b));
  }
}

// Without the carry an off-grid cut changes the Gated DeltaNet's bits (so
// the test above would notice a carry that did nothing), and a carry that
// does not continue the State is refused.
TEST_P(SplitInvariance, OffTheGridCutsNeedTheirCarry) {
  auto model = load();
  std::mt19937 rng(31);
  auto tokens = random_tokens(rng, 100, model->vocab_size());
  State whole = model->new_state();
  PrefillOutput out;
  ASSERT_TRUE(model->prefill(whole, tokens, {}, &out).is_ok());
  // In f32 an off-grid cut without the carry changes the Gated DeltaNet's
  // bits on every recurrent architecture here; in bf16 the cut can happen to
  // give the same bits, so that half of the check runs in f32 only. With
  // quantized weights the products' values carry few significant bits (f16
  // scales times integers), so one cut's reordered sums can come out exact
  // both ways: of several cuts, one must change the bits.
  bool some_cut_differs = false;
  for (int64_t at : {30, 17, 45, 83}) {
    State cut = model->new_state();
    ASSERT_TRUE(model->prefill(cut, std::span(tokens).first(at), {}, &out).is_ok());
    ASSERT_TRUE(model->prefill(cut, std::span(tokens).subspan(at), {}, &out).is_ok());
    some_cut_differs |= !cut.bitwise_equal(whole);
  }
  if (std::get<1>(GetParam()) == Precision::kF32 || !model->schema().has_recurrent()) {
    EXPECT_EQ(some_cut_differs, model->schema().has_recurrent());
  }

  State s = model->new_state();
  PrefillCarry carry;
  PrefillOptions o;
  o.carry = &carry;
  ASSERT_TRUE(model->prefill(s, std::span(tokens).first(30), o, &out).is_ok());
  EXPECT_EQ(carry.position, 30);
  PrefillCarry stale;
  o.carry = &stale;
  EXPECT_EQ(model->prefill(s, std::span(tokens).subspan(30), o, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(s.position(), 30);
}

// A call of any row count from 1 to 70 gives its rows the bits they get in a
// 70-row call, logits and keys alike; and calls of 512 and 700 rows the bits
// of the same tokens split on the grid.
TEST_P(SplitInvariance, RowCountsOneToSeventyAnd512AndMoreInOneCall) {
  auto model = load();
  std::mt19937 rng(77);
  auto tokens = random_tokens(rng, 512, model->vocab_size());
  PrefillOptions all;
  all.all_logits = true;
  State ref = model->new_state();
  PrefillOutput ref_out;
  ASSERT_TRUE(model->prefill(ref, std::span(tokens).first(70), all, &ref_out).is_ok());
  const int64_t V = model->vocab_size();
  for (int64_t rows = 1; rows < 70; ++rows) {
    State s = model->new_state();
    PrefillOutput out;
    ASSERT_TRUE(model->prefill(s, std::span(tokens).first(rows), {}, &out).is_ok());
    EXPECT_EQ(std::memcmp(out.logits.data(), ref_out.logits.data() + (rows - 1) * V, V * 4), 0) << rows << " rows";
    for (size_t c = 0; c < s.n_components(); ++c) {
      if (model->schema().components[c].kind != ComponentKind::kSequence) continue;
      EXPECT_EQ(std::memcmp(s.bytes(c).data(), ref.bytes(c).data(), s.bytes(c).size()), 0)
          << rows << " rows, component " << model->schema().components[c].name;
    }
  }
  // 700 tokens in one call (the model runs them as passes of at most 512
  // rows), as 512 + 188, and split at random grid points.
  tokens.resize(700);
  for (size_t i = 512; i < tokens.size(); ++i) tokens[i] = tokens[i - 500];
  State whole = model->new_state(), two = model->new_state(), split = model->new_state();
  PrefillOutput a, b, c;
  ASSERT_TRUE(model->prefill(whole, tokens, {}, &a).is_ok());
  ASSERT_TRUE(model->prefill(two, std::span(tokens).first(512), {}, &b).is_ok());
  ASSERT_TRUE(model->prefill(two, std::span(tokens).subspan(512), {}, &b).is_ok());
  for (int64_t at = 0; at < 700;) {
    const int64_t n = std::min<int64_t>(700 - at, kGrid * (1 + rng() % 4));
    ASSERT_TRUE(model->prefill(split, std::span(tokens).subspan(at, n), {}, &c).is_ok());
    at += n;
  }
  EXPECT_TRUE(same_bits(a.logits, b.logits));
  EXPECT_TRUE(same_bits(a.logits, c.logits));
  EXPECT_TRUE(whole.bitwise_equal(two));
  EXPECT_TRUE(whole.bitwise_equal(split));
}

TEST_P(SplitState, LastRowLogitsEqualTheAllRowsLogits) {
  auto model = load();
  std::mt19937 rng(99);
  auto tokens = random_tokens(rng, 130, model->vocab_size());
  State a = model->new_state(), b = model->new_state();
  PrefillOutput last, all;
  PrefillOptions opt_all;
  opt_all.all_logits = true;
  ASSERT_TRUE(model->prefill(a, tokens, {}, &last).is_ok());
  ASSERT_TRUE(model->prefill(b, tokens, opt_all, &all).is_ok());
  const int64_t V = model->vocab_size();
  std::vector<float> tail(all.logits.end() - V, all.logits.end());
  EXPECT_TRUE(same_bits(tail, last.logits));
}

TEST_P(SplitInvariance, ThreadCountDoesNotChangeBits) {
  auto one = load(1);
  auto two = load(2);
  std::mt19937 rng(7);
  auto tokens = random_tokens(rng, 150, one->vocab_size());
  State a = one->new_state(), b = two->new_state();
  PrefillOutput oa, ob;
  ASSERT_TRUE(one->prefill(a, tokens, {}, &oa).is_ok());
  ASSERT_TRUE(two->prefill(b, tokens, {}, &ob).is_ok());
  EXPECT_TRUE(same_bits(oa.logits, ob.logits));
  EXPECT_TRUE(a.bitwise_equal(b));
}

TEST_P(SplitState, CapturedSnapshotEqualsTheStateOfAShorterPrefill) {
  auto model = load();
  std::mt19937 rng(5);
  auto tokens = random_tokens(rng, 200, model->vocab_size());
  State full = model->new_state();
  PrefillOptions opt;
  opt.capture_positions = {64, 128, 200};
  PrefillOutput out;
  ASSERT_TRUE(model->prefill(full, tokens, opt, &out).is_ok());
  ASSERT_EQ(out.snapshots.size(), 3u);
  // A model without recurrent components (qwen3) captures empty snapshots.
  EXPECT_EQ(out.snapshots[0].parts.empty(), !model->schema().has_recurrent());
  for (const RecurrentSnapshot& snap : out.snapshots) {
    State shorter = model->new_state();
    PrefillOutput ignored;
    ASSERT_TRUE(model->prefill(shorter, std::span(tokens).first(snap.position), {}, &ignored).is_ok());
    RecurrentSnapshot want = capture_recurrent(shorter);
    ASSERT_EQ(want.parts.size(), snap.parts.size());
    for (size_t i = 0; i < want.parts.size(); ++i)
      EXPECT_TRUE(same_bits(want.parts[i], snap.parts[i])) << "position " << snap.position << " part " << i;
  }
}

TEST_P(SplitState, CaptureOffTheGridIsRefused) {
  auto model = load();
  std::vector<int32_t> tokens(100, 42);
  State s = model->new_state();
  PrefillOptions opt;
  opt.capture_positions = {70};
  PrefillOutput out;
  EXPECT_EQ(model->prefill(s, tokens, opt, &out).code(), Code::kInvalidArgument);
}

// Decode runs the recurrent form of the delta rule, prefill the chunked one:
// without Gated DeltaNet layers (qwen3) decode is bit for bit the prefill of
// one more token; with them the two forms agree within rounding.
TEST_P(SplitState, DecodeAfterPrefillMatchesPrefillOfOneMoreToken) {
  auto model = load();
  std::mt19937 rng(11);
  auto tokens = random_tokens(rng, 140, model->vocab_size());
  State a = model->new_state(), b = model->new_state();
  PrefillOutput pa, pb;
  ASSERT_TRUE(model->prefill(a, std::span(tokens).first(137), {}, &pa).is_ok());
  std::vector<float> decoded;
  for (int64_t i = 137; i < 140; ++i) ASSERT_TRUE(model->decode(a, tokens[i], &decoded).is_ok());
  ASSERT_TRUE(model->prefill(b, tokens, {}, &pb).is_ok());
  EXPECT_EQ(a.position(), b.position());
  if (!model->schema().has_recurrent()) {
    EXPECT_TRUE(same_bits(decoded, pb.logits));
    EXPECT_TRUE(a.bitwise_equal(b));
    return;
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < decoded.size(); ++i) {
    num += (decoded[i] - pb.logits[i]) * (decoded[i] - pb.logits[i]);
    den += pb.logits[i] * pb.logits[i];
  }
  // bf16: a last-bit difference of the recurrent form can move an input of a
  // product to the neighbouring bf16 value.
  EXPECT_LT(std::sqrt(num / den), std::get<1>(GetParam()) == Precision::kBF16 ? 1e-3 : 1e-5);
}

TEST_P(SplitState, OutOfVocabularyTokenIsAnError) {
  auto model = load();
  State s = model->new_state();
  std::vector<int32_t> tokens = {1, 2, static_cast<int32_t>(model->vocab_size())};
  PrefillOutput out;
  Status st = model->prefill(s, tokens, {}, &out);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("index 2"), std::string::npos) << st.message();
  EXPECT_EQ(s.position(), 0);
}

std::string case_name(const ::testing::TestParamInfo<SplitInvariance::ParamType>& info) {
  const Weights w = std::get<2>(info.param);
  return std::string(arch_name(std::get<0>(info.param))) + "_" + precision_name(std::get<1>(info.param)) +
         (w == Weights::kCheckpoint ? "" : std::string("_") + testing::weights_name(w));
}

INSTANTIATE_TEST_SUITE_P(EveryArchAndPrecision, SplitInvariance,
                         ::testing::Combine(::testing::ValuesIn(kAllArchs),
                                            ::testing::Values(Precision::kBF16, Precision::kF32),
                                            ::testing::Values(Weights::kCheckpoint)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(EveryArchAndPrecision, SplitState,
                         ::testing::Combine(::testing::ValuesIn(kAllArchs),
                                            ::testing::Values(Precision::kBF16, Precision::kF32),
                                            ::testing::Values(Weights::kCheckpoint)),
                         case_name);
// Quantized GGUF files made by statebank quantize (the products run on
// quantized activations, runtime/quant.h): a hybrid with dense and one with
// MoE layers.
INSTANTIATE_TEST_SUITE_P(Quantized, SplitInvariance,
                         ::testing::Combine(::testing::Values(Arch::kQwen35, Arch::kQwen3Next),
                                            ::testing::Values(Precision::kF32),
                                            ::testing::Values(Weights::kQ8_0, Weights::kQ4_K_M)),
                         case_name);
// The low-bit mixes: Q2_K with Q3_K, IQ4_NL, IQ4_XS beside the K types.
INSTANTIATE_TEST_SUITE_P(LowBit, SplitInvariance,
                         ::testing::Combine(::testing::Values(Arch::kQwen35), ::testing::Values(Precision::kF32),
                                            ::testing::Values(Weights::kQ2_K, Weights::kIQ4_NL, Weights::kIQ4_XS)),
                         case_name);

}  // namespace
}  // namespace sb
