// The tokenizer and chat template of a GGUF file (server/model_files.h,
// model/gguf_vocab.h): a GGUF written from a checkpoint gives the same ids as
// the checkpoint's tokenizer.json on the whole tokenizer test corpus (with
// and without special-token parsing), the same text back, and the same
// rendered chat; a vocabulary it cannot read is a clear error.
#include "server/model_files.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/gguf_model.h"
#include "model/gguf_vocab.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace sb {
namespace {

class GgufVocabTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    dir_ = new std::string(testing::tiny_checkpoint(Arch::kQwen3Next, 3, DType::kF32));
    gguf_ = new std::string(tmp_->file("m.gguf"));
    Status s = write_gguf_model(*dir_, GgufFileType::kF32, *gguf_);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  static void TearDownTestSuite() {
    delete gguf_;
    delete dir_;
    delete tmp_;
  }
  static testing::TempDir* tmp_;
  static std::string *dir_, *gguf_;
};
testing::TempDir* GgufVocabTest::tmp_ = nullptr;
std::string* GgufVocabTest::dir_ = nullptr;
std::string* GgufVocabTest::gguf_ = nullptr;

TEST_F(GgufVocabTest, SameIdsAsTokenizerJsonOnTheCorpus) {
  std::unique_ptr<Tokenizer> want, got;
  ASSERT_TRUE(Tokenizer::load(*dir_, &want).is_ok());
  Status s = load_model_tokenizer(*gguf_, &got);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(got->vocab_size(), want->vocab_size());
  EXPECT_EQ(got->stop_tokens(), want->stop_tokens());
  const char* src = std::getenv("SB_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "SB_SOURCE_DIR is not set (run through ctest)";
  std::ifstream in(std::string(src) + "/tests/tokenizer/data/corpus.jsonl");
  std::string line;
  std::vector<std::string> texts;
  while (std::getline(in, line))
    if (!line.empty()) texts.push_back(nlohmann::json::parse(line).get<std::string>());
  ASSERT_GT(texts.size(), 1000u);
  // One tokenizer over the whole corpus, then the other: a thread's word
  // cache holds one tokenizer's words at a time.
  for (bool special : {true, false}) {
    std::vector<std::vector<int32_t>> ids;
    for (const std::string& t : texts) ids.push_back(want->encode(t, special));
    for (size_t i = 0; i < texts.size(); ++i) ASSERT_EQ(got->encode(texts[i], special), ids[i]) << texts[i];
    for (size_t i = 0; i < texts.size(); ++i) ASSERT_EQ(got->decode(ids[i]), want->decode(ids[i])) << texts[i];
  }
}

TEST_F(GgufVocabTest, SameChatTemplateAndSpecialTokens) {
  ChatTemplate want, got;
  ASSERT_TRUE(ChatTemplate::load(*dir_, &want).is_ok());
  Status s = load_model_chat_template(*gguf_, &got);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(got.flavour(), want.flavour());
  nlohmann::ordered_json m = nlohmann::ordered_json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi <think> there"}}});
  RenderedChat a, b;
  ChatOptions o;
  o.add_generation_prompt = true;
  ASSERT_TRUE(want.render(m, nullptr, o, &a).is_ok());
  ASSERT_TRUE(got.render(m, nullptr, o, &b).is_ok());
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.final_user_offset, b.final_user_offset);
}

TEST_F(GgufVocabTest, AVocabularyItCannotReadIsAClearError) {
  std::ifstream in(*gguf_, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string from = std::string("\x08\0\0\0\x05\0\0\0\0\0\0\0qwen2", 17);
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, from.size(), std::string("\x08\0\0\0\x05\0\0\0\0\0\0\0llama", 17));
  std::ofstream(tmp_->file("bad.gguf"), std::ios::binary) << bytes;
  std::unique_ptr<Tokenizer> t;
  Status s = load_model_tokenizer(tmp_->file("bad.gguf"), &t);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tokenizer.ggml.pre"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("llama"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sb
