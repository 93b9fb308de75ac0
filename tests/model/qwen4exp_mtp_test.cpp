// qwen4exp's MTP head (docs/model-spec.md 7.7): gen-model writes its own
// tensors; the model loads it and its own results keep every bit; the State holds, for every
// position, the head's QSA rows (K, V, raw indexer keys, pooled keys) that
// its direct forward over the pairs (the trunk's streams of position j - 1,
// token j) gives, and the carried streams; a draft after the State equals
// the head's direct forward over all pairs and the draft row in one call;
// any prefill split gives the same head state and drafts, and a damaged
// head row or carried row drafts otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "model/checkpoint.h"
#include "model/mtp_head.h"
#include "tests/util/models.h"
#include "tests/util/mtp_drafts.h"

namespace sb {
namespace {

void with_head(ModelConfig* c) { c->mtp_layers = 1; }

// Seed 7: shared_model()'s, the same model without a head.
std::string head_checkpoint() { return testing::tiny_checkpoint(Arch::kQwen4Exp, 7, DType::kBF16, "_mtp", with_head); }

const Model& head_model() {
  static std::unique_ptr<Model> m = testing::load_model(head_checkpoint());
  return *m;
}

using testing::component;
using testing::draft_logits;
using testing::some_tokens;


// Its own tensors (model_mtp_head_test checks that gen-model adds only the
// head's and keeps the model's bytes, for every family).
TEST(Qwen4ExpMtp, GenModelWritesTheHeadsOwnTensors) {
  std::unique_ptr<Checkpoint> head;
  ASSERT_TRUE(Checkpoint::open(head_checkpoint(), &head).is_ok());
  ModelConfig c;
  ASSERT_TRUE(parse_config(head_checkpoint(), &c).is_ok());
  EXPECT_EQ(c.mtp_layers, 1);
  const int64_t H = c.hidden_size;
  for (auto [name, shape] : {std::pair<const char*, std::vector<int64_t>>{kMtpFcHidden, {H, H}},
                             {kMtpFcEmbedding, {H, H}},
                             {"mtp.pre_fc_norm_hidden.weight", {c.hc_count * H}},
                             {"mtp.layers.0.self_attn.indexer.index_qk_proj.weight",
                              {(c.index_n_heads + 1) * c.index_head_dim, H}},
                             {"mtp.layers.0.attn_hyper_connection.block_inject_weight.weight", {c.hc_count, c.hc_count * H}},
                             {"mtp.hyper_connection_mixer.input_mix_weight_up.weight", {c.hc_count * H, c.hc_lowrank}}}) {
    const TensorView* t = head->find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
  }
  EXPECT_EQ(head->find(kMtpFc), nullptr);
  EXPECT_EQ(head->find("mtp.norm.weight"), nullptr);
}

TEST(Qwen4ExpMtp, LoadsAndChangesNoBitOfTheModelsResults) {
  const Model& m = head_model();
  const Model& none = testing::shared_model(Arch::kQwen4Exp);
  ASSERT_TRUE(m.has_mtp());
  EXPECT_FALSE(none.has_mtp());
  const std::vector<int32_t> tokens = some_tokens(m, 37, 3);
  State a = m.new_state(), b = none.new_state();
  PrefillOutput with, without;
  ASSERT_TRUE(m.prefill(a, tokens, PrefillOptions{}, &with).is_ok());
  ASSERT_TRUE(none.prefill(b, tokens, PrefillOptions{}, &without).is_ok());
  EXPECT_EQ(with.logits.to_vector(), without.logits.to_vector());
  // The model's own components first, the same bits; the head's five after.
  ASSERT_EQ(a.n_components(), b.n_components() + 5);
  for (size_t c = 0; c < b.n_components(); ++c) {
    EXPECT_EQ(a.schema().components[c], b.schema().components[c]);
    EXPECT_TRUE(std::ranges::equal(a.bytes(c), b.bytes(c))) << b.schema().components[c].name;
  }
  const int64_t ratio = m.config().index_compress_ratio;
  EXPECT_EQ(a.rows(component(a, "mtp.index_raw")), tokens.size());
  EXPECT_EQ(a.rows(component(a, "mtp.index_pooled")), tokens.size() / static_cast<size_t>(ratio));
  EXPECT_NE(m.fingerprint(), none.fingerprint());
  EXPECT_EQ(with.hidden.size(), static_cast<size_t>(m.config().hc_count * m.config().hidden_size));
  EXPECT_TRUE(m.verify_state(a).is_ok());
  // The head's pooled rows are checked as the layers' are.
  State forged = a;
  std::vector<uint8_t>& pooled = forged.storage(component(forged, "mtp.index_pooled"));
  pooled[0] ^= 0x40;
  EXPECT_FALSE(m.verify_state(forged).is_ok());
}

// The State's head rows are what the head's direct forward over every pair
// gives; a draft after the State equals that forward with the draft row
// appended, in one call.
TEST(Qwen4ExpMtp, StateRowsAndDraftsEqualTheHeadsDirectForward) {
  const Model& m = head_model();
  const int64_t W = m.config().hc_count * m.config().hidden_size;
  const std::vector<int32_t> tokens = some_tokens(m, 45, 17);
  State s = m.new_state();
  PrefillOptions o;
  o.all_logits = true;
  PrefillOutput out;
  ASSERT_TRUE(m.prefill(s, tokens, o, &out).is_ok());
  ASSERT_EQ(out.hidden.size(), tokens.size() * W);
  std::vector<float> previous(W, 0.0f);
  previous.insert(previous.end(), out.hidden.begin(), out.hidden.end() - W);
  // The pairs of every position, then the draft's own row at position n.
  const int32_t next = out.stats.back().argmax;
  std::vector<int32_t> all = tokens;
  all.push_back(next);
  previous.insert(previous.end(), out.hidden.end() - W, out.hidden.end());
  State direct = m.new_mtp_state();
  MtpOutput once;
  ASSERT_TRUE(m.mtp_forward(MtpStep{&direct, 0, 0, previous, all}, &once).is_ok());
  const auto drafts = draft_logits(m, s, next, 1);
  ASSERT_EQ(drafts.size(), 1u);
  EXPECT_EQ(drafts[0], once.logits);
  // The pairs alone give the State's rows.
  State pairs = m.new_mtp_state();
  MtpOutput ignored;
  ASSERT_TRUE(m.mtp_forward(MtpStep{&pairs, 0, 0, std::span(previous).first(tokens.size() * W),
                                    std::span(all).first(tokens.size())},
                            &ignored)
                  .is_ok());
  for (const char* name : {"mtp.k", "mtp.v", "mtp.index_raw", "mtp.index_pooled"}) {
    const size_t c = component(pairs, name);
    EXPECT_TRUE(std::ranges::equal(pairs.bytes(c), s.bytes(component(s, name)))) << name;
  }
  State synced = m.new_mtp_state();
  std::vector<float> carried;
  ASSERT_TRUE(m.mtp_sync(s, 0, &synced, &carried).is_ok());
  EXPECT_TRUE(synced.bitwise_equal(pairs));
  EXPECT_TRUE(std::equal(carried.begin(), carried.end(), out.hidden.end() - W));
}

// Past the indexer's budget (the tiny preset keeps 4 blocks of 4), so the
// head's own selection drops blocks.
TEST(Qwen4ExpMtp, PrefillSplitsGiveTheSameHeadStateAndDrafts) {
  const Model& m = head_model();
  const std::vector<int32_t> tokens = some_tokens(m, 150, 5);
  State whole = m.new_state();
  PrefillOutput out;
  ASSERT_TRUE(m.prefill(whole, tokens, PrefillOptions{}, &out).is_ok());
  const int32_t next = out.stats.back().argmax;
  const auto want = draft_logits(m, whole, next, 3);
  for (std::vector<int64_t> cuts : std::vector<std::vector<int64_t>>{{64, 128}, {63}, {65, 129}, {1, 100, 149}}) {
    SCOPED_TRACE("first cut " + std::to_string(cuts[0]));
    const State s = testing::prefill_in_pieces(m, tokens, cuts);
    EXPECT_TRUE(s.bitwise_equal(whole));
    EXPECT_EQ(draft_logits(m, s, next, 3), want);
  }
  // The last rows of K and of the carried streams; every pooled key (the
  // top-k selection reads them all, and one block's key may not be chosen).
  for (auto [name, bytes_from_end] : {std::pair<const char*, size_t>{"mtp.k", 64}, {"mtp.hidden", 64},
                                      {"mtp.index_pooled", SIZE_MAX}}) {
    SCOPED_TRACE(name);
    State damaged = whole;
    std::vector<uint8_t>& bytes = damaged.storage(component(damaged, name));
    std::fill(bytes.end() - static_cast<std::ptrdiff_t>(std::min(bytes_from_end, bytes.size())), bytes.end(),
              uint8_t{0x3f});
    EXPECT_NE(draft_logits(m, damaged, next, 3), want);
  }
}

}  // namespace
}  // namespace sb
