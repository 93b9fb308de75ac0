// DecodingRules as a LogitsProcessor: logit_bias adds, the repetition
// penalty divides positive and multiplies negative logits of prompt and
// generated tokens, presence and frequency penalties follow the generated
// counts, and a grammar masks with -infinity while leaving allowed logits as
// the other rules made them.
#include "server/protocols/decoding_rules.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sb {
namespace {

TEST(DecodingRules, PenaltiesAndBias) {
  DecodingRules r;
  r.logit_bias = {{1, 2.0f}, {5, -100.0f}};
  r.repetition_penalty = 2.0f;
  r.prompt = {2, 3};
  r.presence_penalty = 0.5f;
  r.frequency_penalty = 0.25f;
  auto p = r.make();
  std::vector<float> l = {1.0f, 1.0f, 4.0f, -4.0f, 1.0f, 1.0f};
  ASSERT_TRUE(p->process(l, 10, {}).is_ok());
  EXPECT_EQ(l, (std::vector<float>{1.0f, 3.0f, 2.0f, -8.0f, 1.0f, -99.0f}));
  ASSERT_TRUE(p->accept(4).is_ok());
  ASSERT_TRUE(p->accept(4).is_ok());
  l = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  ASSERT_TRUE(p->process(l, 8, {}).is_ok());
  // Token 4: generated twice: /2 (repetition), then - 0.5 - 2 * 0.25.
  EXPECT_FLOAT_EQ(l[4], 0.5f - 0.5f - 0.5f);
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  // A fresh processor starts over (one per run of a request).
  auto again = r.make();
  l = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  ASSERT_TRUE(again->process(l, 10, {}).is_ok());
  EXPECT_FLOAT_EQ(l[4], 1.0f);
  EXPECT_TRUE(DecodingRules{}.empty());
  EXPECT_FALSE(r.empty());
}

TEST(DecodingRules, GrammarMasksButKeepsAllowedLogits) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 128; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("");  // 128: stop
  DecodingRules r;
  r.vocabulary = std::make_shared<constrain::Vocabulary>(bytes, std::vector<int32_t>{128});
  std::shared_ptr<constrain::Grammar> g;
  ASSERT_TRUE(constrain::Grammar::from_json_schema({{"enum", {"yes", "no"}}}, "s", &g).is_ok());
  r.grammar = g;
  r.logit_bias = {{'"', 1.5f}};
  auto p = r.make();
  std::vector<float> l(129, 0.25f);
  ASSERT_TRUE(p->process(l, 10, {}).is_ok());
  for (size_t i = 0; i < l.size(); ++i) {
    if (i == '"') EXPECT_EQ(l[i], 1.75f);
    else EXPECT_TRUE(std::isinf(l[i]) && l[i] < 0) << i;
  }
  for (char c : std::string("\"no\"")) ASSERT_TRUE(p->accept(c).is_ok());
  std::fill(l.begin(), l.end(), 0.25f);
  ASSERT_TRUE(p->process(l, 6, {}).is_ok());
  for (size_t i = 0; i < l.size(); ++i) EXPECT_EQ(std::isinf(l[i]), i != 128) << i;
  EXPECT_FALSE(p->accept('x').is_ok());
}

}  // namespace
}  // namespace sb
