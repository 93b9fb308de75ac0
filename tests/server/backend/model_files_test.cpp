// The tokenizer and chat template of a GGUF file (server/backend/model_files.h,
// gguf/vocab.h): a GGUF written from a checkpoint gives the same ids as
// the checkpoint's tokenizer.json on the whole tokenizer test corpus (with
// and without special-token parsing), the same text back, and the same
// rendered chat; a vocabulary it cannot read is a clear error. Sampling
// defaults from generation_config.json and general.sampling.* keys.
#include "server/backend/model_files.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gguf/vocab.h"
#include "model/gguf_model.h"
#include "server/protocols/request_parse.h"
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

// Sampling defaults: Qwen3's published generation_config.json, and the same
// values as llama.cpp's general.sampling.* keys in a GGUF file.
TEST(SamplingDefaults, FromGenerationConfigJson) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  std::filesystem::create_directories(dir);
  SamplingDefaults d;
  ASSERT_TRUE(load_sampling_defaults(dir, &d).is_ok());  // no file: no defaults
  EXPECT_FALSE(d.temperature || d.top_p || d.top_k || d.min_p || d.repetition_penalty || d.presence_penalty);
  std::ofstream(dir + "/generation_config.json")
      << R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
             "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"})";
  Status s = load_sampling_defaults(dir, &d);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(d.temperature, 0.6f);
  EXPECT_EQ(d.top_p, 0.95f);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_FALSE(d.min_p || d.repetition_penalty || d.presence_penalty);
  std::ofstream(dir + "/generation_config.json") << R"({"do_sample": false, "temperature": 0.7, "repetition_penalty": 1.05})";
  ASSERT_TRUE(load_sampling_defaults(dir, &d).is_ok());
  EXPECT_EQ(d.temperature, 0.0f);  // do_sample false: greedy
  EXPECT_EQ(d.repetition_penalty, 1.05f);
  // Values no request could send are errors naming the file and key.
  std::ofstream(dir + "/generation_config.json") << R"({"temperature": 7})";
  s = load_sampling_defaults(dir, &d);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("generation_config.json: temperature"), std::string::npos) << s.message();
  std::ofstream(dir + "/generation_config.json") << R"({"top_k": "twenty"})";
  EXPECT_NE(load_sampling_defaults(dir, &d).message().find("top_k"), std::string::npos);
  std::ofstream(dir + "/generation_config.json") << "{not json";
  EXPECT_FALSE(load_sampling_defaults(dir, &d).is_ok());
}

TEST_F(GgufVocabTest, SamplingDefaultsFromGgufKeys) {
  SamplingDefaults d;
  ASSERT_TRUE(load_sampling_defaults(*gguf_, &d).is_ok());  // the export writes none
  EXPECT_FALSE(d.temperature || d.top_p || d.top_k || d.min_p || d.repetition_penalty);
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("qwen3"));
  w.set("general.sampling.temp", GgufValue::f32(0.6f));
  w.set("general.sampling.top_k", GgufValue::i32(20));
  w.set("general.sampling.top_p", GgufValue::f32(0.95f));
  w.set("general.sampling.min_p", GgufValue::f32(0.0f));
  w.set("general.sampling.penalty_repeat", GgufValue::f32(1.05f));
  const std::string path = tmp_->file("sampling.gguf");
  ASSERT_TRUE(w.write(path).is_ok());
  Status s = load_sampling_defaults(path, &d);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(d.temperature, 0.6f);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_EQ(d.top_p, 0.95f);
  EXPECT_EQ(d.min_p, 0.0f);  // a declared zero is a value
  EXPECT_EQ(d.repetition_penalty, 1.05f);
  GgufWriter bad;
  bad.set("general.sampling.top_p", GgufValue::string("high"));
  ASSERT_TRUE(bad.write(tmp_->file("bad-sampling.gguf")).is_ok());
  s = load_sampling_defaults(tmp_->file("bad-sampling.gguf"), &d);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("general.sampling.top_p"), std::string::npos) << s.message();
}

// A request's own fields win over the defaults, each on its own.
TEST(SamplingDefaults, ARequestsOwnFieldsWin) {
  ParseLimits limits;
  limits.sampling_defaults.temperature = 0.6f;
  limits.sampling_defaults.top_k = 20;
  limits.sampling_defaults.repetition_penalty = 1.05f;
  const nlohmann::ordered_json user = {{{"role", "user"}, {"content", "hi"}}};
  ChatParams p = parse_chat_params({{"messages", user}}, limits);
  EXPECT_EQ(p.sampling.temperature, 0.6f);
  EXPECT_EQ(p.sampling.top_k, 20);
  EXPECT_EQ(p.sampling.top_p, 1.0f);  // not given by the model: the API's default
  EXPECT_EQ(p.repetition_penalty, 1.05f);
  p = parse_chat_params({{"messages", user}, {"temperature", 0}, {"top_k", 5}}, limits);
  EXPECT_EQ(p.sampling.temperature, 0.0f);
  EXPECT_EQ(p.sampling.top_k, 5);
  EXPECT_EQ(p.repetition_penalty, 1.05f);
  CompletionParams c = parse_completion_params({{"prompt", "x"}, {"repetition_penalty", 1.0}}, limits);
  EXPECT_EQ(c.sampling.temperature, 0.6f);
  EXPECT_EQ(c.repetition_penalty, 1.0f);
  // Without defaults (--sampling-defaults greedy): greedy, as before.
  EXPECT_EQ(parse_chat_params({{"messages", user}}, ParseLimits{}).sampling.temperature, 0.0f);
}

}  // namespace
}  // namespace sb
