// The MTP head (model/mtp_head.h, Model::mtp_forward): gen-model writes it
// only when asked and leaves the model's own tensors' bytes as they were;
// the model loads it for qwen3_next (MoE layer), qwen3_5 (dense) and
// qwen3_5_moe (fused experts); its forward is deterministic, rows split
// over calls give the bits of one call, a kept prefix drops the rest, and
// bad steps are refused with a message. The model's State holds the head's
// keys and values of every position (its prompt's too) and the carried
// hidden row, the same whatever the prefill split.
#include "model/mtp_head.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "model/checkpoint.h"
#include "runtime/cpu/backend.h"
#include "tests/util/models.h"
#include "tests/util/mtp_drafts.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

void with_head(ModelConfig* c) { c->mtp_layers = 1; }

std::string head_checkpoint(Arch arch) { return testing::tiny_checkpoint(arch, 1, DType::kBF16, "_mtp", with_head); }

// The trunk's hidden rows after the final norm for `tokens`, one per token.
std::vector<float> trunk_hidden(const Model& m, std::span<const int32_t> tokens) {
  State s = m.new_state();
  PrefillOptions o;
  o.all_logits = true;
  PrefillOutput out;
  EXPECT_TRUE(m.prefill(s, tokens, o, &out).is_ok());
  return out.hidden;
}

TEST(MtpHead, GenModelWritesItOnlyWhenAskedAndKeepsTheModelsBytes) {
  for (Arch arch : {Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe, Arch::kQwen4Exp}) {
    SCOPED_TRACE(arch_name(arch));
    std::unique_ptr<Checkpoint> plain, head;
    ASSERT_TRUE(Checkpoint::open(testing::tiny_checkpoint(arch), &plain).is_ok());
    ASSERT_TRUE(Checkpoint::open(head_checkpoint(arch), &head).is_ok());
    for (const auto& [name, t] : plain->tensors()) {
      EXPECT_NE(name.rfind("mtp.", 0), 0u) << name;
      const TensorView* h = head->find(name);
      ASSERT_NE(h, nullptr) << name;
      ASSERT_EQ(h->nbytes, t.nbytes) << name;
      EXPECT_EQ(std::memcmp(h->data, t.data, t.nbytes), 0) << name;
    }
    ModelConfig c;
    ASSERT_TRUE(parse_config(head_checkpoint(arch), &c).is_ok());
    EXPECT_EQ(c.mtp_layers, 1);
    EXPECT_EQ(head->tensors().size(), plain->tensors().size() + mtp_tensors(c).size());
  }
}

TEST(MtpHead, LoadsForEveryFamilyWithAHead) {
  for (Arch arch : {Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe}) {
    SCOPED_TRACE(arch_name(arch));
    std::unique_ptr<Model> m = testing::load_model(head_checkpoint(arch));
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(m->has_mtp());
    std::unique_ptr<Model> none = testing::load_model(testing::tiny_checkpoint(arch));
    ASSERT_NE(none, nullptr);
    EXPECT_FALSE(none->has_mtp());
    // The head changes no bit of the model's own results.
    const std::vector<int32_t> tokens = {5, 900, 31, 4};
    State a = m->new_state(), b = none->new_state();
    PrefillOutput with, without;
    ASSERT_TRUE(m->prefill(a, tokens, PrefillOptions{}, &with).is_ok());
    ASSERT_TRUE(none->prefill(b, tokens, PrefillOptions{}, &without).is_ok());
    EXPECT_EQ(with.logits.to_vector(), without.logits.to_vector());
    // The model's own components first, the same bits; the head's three after.
    ASSERT_EQ(a.n_components(), b.n_components() + 3);
    for (size_t c = 0; c < b.n_components(); ++c) {
      EXPECT_EQ(a.schema().components[c], b.schema().components[c]);
      EXPECT_TRUE(std::ranges::equal(a.bytes(c), b.bytes(c))) << b.schema().components[c].name;
    }
    EXPECT_NE(m->fingerprint(), none->fingerprint());
    EXPECT_EQ(with.hidden.size(), static_cast<size_t>(m->config().hidden_size));
    EXPECT_TRUE(without.hidden.empty());
    MtpOutput out;
    State kv = none->new_mtp_state();
    EXPECT_FALSE(none->mtp_forward(MtpStep{&kv, 0, 0, {}, {}}, &out).is_ok());
    // Left unloaded on request: no head, and the State of a model without one.
    RuntimeOptions unloaded;
    unloaded.mtp_head = false;
    std::unique_ptr<Model> skipped;
    ASSERT_TRUE(Model::load(head_checkpoint(arch), unloaded, cpu_kernels_factory(), &skipped).is_ok());
    EXPECT_FALSE(skipped->has_mtp());
    EXPECT_EQ(skipped->schema(), none->schema());
    EXPECT_NE(skipped->fingerprint(), m->fingerprint());
  }
}

using testing::component;
using testing::draft_logits;
using testing::some_tokens;


// Row j of the State's head keys and values is the head's pair (the
// final-normed hidden row of position j - 1, zeros for j = 0; token j) at
// position j, as llama.cpp's draft-mtp and vLLM fill them over a prompt;
// the carried row is the last position's hidden row.
TEST(MtpHead, TheStateHoldsTheHeadsPairOfEveryPosition) {
  for (Arch arch : {Arch::kQwen3Next, Arch::kQwen35}) {
    SCOPED_TRACE(arch_name(arch));
    std::unique_ptr<Model> m = testing::load_model(head_checkpoint(arch));
    ASSERT_NE(m, nullptr);
    const int64_t H = m->config().hidden_size;
    const std::vector<int32_t> tokens = some_tokens(*m, 150, 17);
    State s = m->new_state();
    PrefillOptions o;
    o.all_logits = true;
    PrefillOutput out;
    ASSERT_TRUE(m->prefill(s, tokens, o, &out).is_ok());
    std::vector<float> previous(H, 0.0f);
    previous.insert(previous.end(), out.hidden.begin(), out.hidden.end() - H);
    State pairs = m->new_mtp_state();
    MtpOutput ignored;
    ASSERT_TRUE(m->mtp_forward(MtpStep{&pairs, 0, 0, previous, tokens}, &ignored).is_ok());
    EXPECT_TRUE(std::ranges::equal(pairs.bytes(0), s.bytes(component(s, "mtp.k"))));
    EXPECT_TRUE(std::ranges::equal(pairs.bytes(1), s.bytes(component(s, "mtp.v"))));
    State synced = m->new_mtp_state();
    std::vector<float> carried;
    ASSERT_TRUE(m->mtp_sync(s, 0, &synced, &carried).is_ok());
    EXPECT_TRUE(synced.bitwise_equal(pairs));
    EXPECT_TRUE(std::equal(carried.begin(), carried.end(), out.hidden.end() - H));
    EXPECT_TRUE(s.check_consistent().is_ok());
    EXPECT_TRUE(m->verify_state(s).is_ok());
  }
}

// Prefill split anywhere (on the grid, or off it with a carry) gives the
// same State, head components included, and so the same drafts; a draft
// over a damaged head row or carried row differs (the comparison can fail).
TEST(MtpHead, PrefillSplitsGiveTheSameHeadStateAndDrafts) {
  std::unique_ptr<Model> m = testing::load_model(head_checkpoint(Arch::kQwen3Next));
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> tokens = some_tokens(*m, 200, 5);
  State whole = m->new_state();
  PrefillOutput out;
  ASSERT_TRUE(m->prefill(whole, tokens, PrefillOptions{}, &out).is_ok());
  const int32_t next = out.stats.back().argmax;
  const auto want = draft_logits(*m, whole, next, 3);
  for (std::vector<int64_t> cuts : std::vector<std::vector<int64_t>>{{64, 128}, {63}, {65, 129}, {1, 100, 199}}) {
    SCOPED_TRACE("first cut " + std::to_string(cuts[0]));
    const State s = testing::prefill_in_pieces(*m, tokens, cuts);
    EXPECT_TRUE(s.bitwise_equal(whole));
    EXPECT_EQ(draft_logits(*m, s, next, 3), want);
  }
  for (const char* name : {"mtp.k", "mtp.hidden"}) {
    SCOPED_TRACE(name);
    State damaged = whole;
    std::vector<uint8_t>& bytes = damaged.storage(component(damaged, name));
    std::fill(bytes.end() - 64, bytes.end(), uint8_t{0});
    EXPECT_NE(draft_logits(*m, damaged, next, 3), want);
  }
}

// Verify rows (speculative decoding) append the head's rows and carry the
// hidden row like one-token steps; rolled back to a row's state, the State
// (head components included) is bit for bit that of plain decoding there.
TEST(MtpHead, VerifyRowsRollBackTheHeadStateWithTheRest) {
  std::unique_ptr<Model> m = testing::load_model(head_checkpoint(Arch::kQwen35));
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = some_tokens(*m, 70, 3), rows = {12, 345, 6};
  State plain = m->new_state();
  PrefillOutput out;
  ASSERT_TRUE(m->prefill(plain, prompt, PrefillOptions{}, &out).is_ok());
  State verified = plain;
  std::vector<float> logits;
  ASSERT_TRUE(m->decode(plain, rows[0], &logits).is_ok());
  ASSERT_TRUE(m->decode(plain, rows[1], &logits).is_ok());
  VerifyRollback kept;
  SequenceStep step;
  step.state = &verified;
  step.tokens = rows;
  step.decode = true;
  step.logits = LogitRows::kAll;
  step.rollback = &kept;
  std::vector<SequenceOutput> outs;
  ASSERT_TRUE(m->forward(std::span<const SequenceStep>(&step, 1), &outs).is_ok());
  ASSERT_EQ(kept.rows.size(), 2u);
  EXPECT_FALSE(verified.bitwise_equal(plain));
  ASSERT_TRUE(m->roll_back(verified, kept, 2).is_ok());
  EXPECT_TRUE(verified.bitwise_equal(plain));
  EXPECT_EQ(draft_logits(*m, verified, 7, 2), draft_logits(*m, plain, 7, 2));
}

// The head's layer count comes from either name; a head of two layers is
// refused naming the field.
TEST(MtpHead, ConfigNamesAndBadHeadsAreClearErrors) {
  ModelConfig c;
  ASSERT_TRUE(parse_config(head_checkpoint(Arch::kQwen35), &c).is_ok());
  std::string json = config_to_json(c);
  EXPECT_NE(json.find("\"mtp_num_hidden_layers\": 1"), std::string::npos);
  const size_t at = json.find("mtp_num_hidden_layers");
  ModelConfig other;
  std::string nextn = json;
  nextn.replace(at, std::strlen("mtp_num_hidden_layers"), "num_nextn_predict_layers");
  ASSERT_TRUE(parse_config_json(nextn, "config.json", &other).is_ok());
  EXPECT_EQ(other.mtp_layers, 1);
  EXPECT_EQ(other.describe(), c.describe());  // the head is no part of the model's numbers

  testing::TempDir tmp;
  for (const auto& e : std::filesystem::directory_iterator(head_checkpoint(Arch::kQwen35)))
    std::filesystem::create_symlink(e.path(), tmp.file(e.path().filename().string()));
  std::filesystem::remove(tmp.file("config.json"));
  std::string two = json;
  two.replace(json.find(": 1", at), 3, ": 2");
  testing::write_file(tmp.file("config.json"), two);
  std::unique_ptr<Model> m;
  const Status s = Model::load(tmp.path(), RuntimeOptions{}, cpu_kernels_factory(), &m);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("mtp_num_hidden_layers is 2"), std::string::npos) << s.message();

  ModelConfig none = c;
  none.mtp_layers = 0;
  EXPECT_TRUE(mtp_tensors(none).empty());
}

TEST(MtpHead, ForwardIsDeterministicAndSplitsLikeOneCall) {
  std::unique_ptr<Model> m = testing::load_model(head_checkpoint(Arch::kQwen3Next));
  ASSERT_NE(m, nullptr);
  const int64_t H = m->config().hidden_size;
  const std::vector<int32_t> tokens = {11, 2000, 37, 512, 9, 77};
  const std::vector<float> hidden = trunk_hidden(*m, tokens);
  ASSERT_EQ(hidden.size(), tokens.size() * H);
  // Pairs (hidden of token i, token i + 1) at positions 1..5.
  const std::span<const float> h(hidden.data(), 5 * H);
  const std::span<const int32_t> next(tokens.data() + 1, 5);
  State one = m->new_mtp_state(), again = m->new_mtp_state(), split = m->new_mtp_state();
  MtpOutput a, b, c;
  ASSERT_TRUE(m->mtp_forward(MtpStep{&one, 0, 1, h, next}, &a).is_ok());
  ASSERT_TRUE(m->mtp_forward(MtpStep{&again, 0, 1, h, next}, &b).is_ok());
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_TRUE(one.bitwise_equal(again));
  ASSERT_TRUE(m->mtp_forward(MtpStep{&split, 0, 1, h.subspan(0, 2 * H), next.subspan(0, 2)}, &c).is_ok());
  ASSERT_TRUE(m->mtp_forward(MtpStep{&split, 2, 3, h.subspan(2 * H), next.subspan(2)}, &c).is_ok());
  EXPECT_EQ(a.logits, c.logits);
  EXPECT_EQ(a.hidden, c.hidden);
  EXPECT_EQ(a.stats.argmax, c.stats.argmax);
  // A depth-2 row on top, then the same row again after dropping it.
  const int32_t draft = a.stats.argmax;
  MtpOutput d1, d2;
  ASSERT_TRUE(m->mtp_forward(MtpStep{&one, 5, 6, a.hidden, {&draft, 1}}, &d1).is_ok());
  EXPECT_EQ(one.rows(0), 6u);
  ASSERT_TRUE(m->mtp_forward(MtpStep{&one, 5, 6, a.hidden, {&draft, 1}}, &d2).is_ok());
  EXPECT_EQ(one.rows(0), 6u);
  EXPECT_EQ(d1.logits, d2.logits);
  EXPECT_NE(d1.logits, a.logits);
}

TEST(MtpHead, ADraftVocabularyIsTheFirstRowsOfTheFullOne) {
  const std::string dir = head_checkpoint(Arch::kQwen35);
  std::unique_ptr<Model> full, reduced;
  RuntimeOptions o;
  o.mtp_draft_vocab = 0;
  ASSERT_TRUE(Model::load(dir, o, cpu_kernels_factory(), &full).is_ok());
  o.mtp_draft_vocab = 1000;
  ASSERT_TRUE(Model::load(dir, o, cpu_kernels_factory(), &reduced).is_ok());
  const std::vector<int32_t> tokens = {3, 14, 159, 2653};
  const std::vector<float> hidden = trunk_hidden(*full, tokens);
  const int64_t H = full->config().hidden_size;
  State a = full->new_mtp_state(), b = reduced->new_mtp_state();
  MtpOutput fa, rb;
  const std::span<const float> h(hidden.data(), 3 * H);
  const std::span<const int32_t> next(tokens.data() + 1, 3);
  ASSERT_TRUE(full->mtp_forward(MtpStep{&a, 0, 1, h, next}, &fa).is_ok());
  ASSERT_TRUE(reduced->mtp_forward(MtpStep{&b, 0, 1, h, next}, &rb).is_ok());
  ASSERT_EQ(fa.logits.size(), static_cast<size_t>(full->vocab_size()));
  ASSERT_EQ(rb.logits.size(), 1000u);
  EXPECT_TRUE(std::equal(rb.logits.begin(), rb.logits.end(), fa.logits.begin()));
  EXPECT_EQ(rb.hidden, fa.hidden);
  EXPECT_LT(rb.stats.argmax, 1000);
}

TEST(MtpHead, BadStepsAreRefusedWithAMessage) {
  std::unique_ptr<Model> m = testing::load_model(head_checkpoint(Arch::kQwen35));
  ASSERT_NE(m, nullptr);
  const int64_t H = m->config().hidden_size;
  std::vector<float> hidden(2 * H, 0.5f);
  const std::vector<int32_t> tokens = {1, 2};
  State kv = m->new_mtp_state(), other = m->new_state();
  MtpOutput out;
  const std::vector<MtpStep> bad = {
      {nullptr, 0, 0, hidden, tokens},
      {&other, 0, 0, hidden, tokens},
      {&kv, 1, 0, hidden, tokens},
      {&kv, 0, -1, hidden, tokens},
      {&kv, 0, 0, std::span<const float>(hidden).subspan(1), tokens},
      {&kv, 0, 0, {}, {}},
  };
  for (const MtpStep& s : bad) {
    const Status st = m->mtp_forward(s, &out);
    EXPECT_FALSE(st.is_ok());
    EXPECT_FALSE(st.message().empty());
  }
  const std::vector<int32_t> outside = {1, static_cast<int32_t>(m->vocab_size())};
  EXPECT_FALSE(m->mtp_forward(MtpStep{&kv, 0, 0, hidden, outside}, &out).is_ok());
  EXPECT_EQ(kv.rows(0), 0u);  // nothing appended by a refused step
  EXPECT_TRUE(m->mtp_forward(MtpStep{&kv, 0, 0, hidden, tokens}, &out).is_ok());
  // mtp_sync wants the model's State and a head State.
  const State model_state = m->new_state();
  EXPECT_FALSE(m->mtp_sync(kv, 0, &kv, &hidden).is_ok());
  EXPECT_FALSE(m->mtp_sync(model_state, 0, &other, &hidden).is_ok());
  EXPECT_FALSE(m->mtp_sync(model_state, 0, nullptr, &hidden).is_ok());
  EXPECT_TRUE(m->mtp_sync(model_state, 0, &kv, &hidden).is_ok());
  EXPECT_EQ(kv.rows(0), 0u);
}

}  // namespace
}  // namespace sb
