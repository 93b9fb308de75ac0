// Tokenizer behaviour on the real Qwen3 tokenizer.json (SB_TOKENIZER_DIR) and
// on small hand-written tokenizer files: loading and its errors, added and
// special tokens, NFC, the pre-tokenizer's whitespace semantics, BPE merges in
// both stored forms, the encode boundary property, lossy and streaming decode.
#include <gtest/gtest.h>

#include <random>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "tests/tokenizer/test_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/split_regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace sb {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

const char kQwenPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> pieces(const SplitRegex& re, const std::string& text) {
  std::vector<std::string_view> p;
  re.split(text, &p);
  return {p.begin(), p.end()};
}

// A minimal byte-level BPE tokenizer.json: the 256 byte tokens (ids 0..255 in
// byte order), merges "a b"->256, "ab c"->257, "c c"->258, and two added tokens.
json tiny_tokenizer(bool merges_as_strings) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::from_bytes(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  vocab["cc"] = 258;
  json merges = json::array();
  for (auto [l, r] : {std::pair{"a", "b"}, {"ab", "c"}, {"c", "c"}}) {
    if (merges_as_strings)
      merges.push_back(std::string(l) + " " + r);
    else
      merges.push_back(json::array({l, r}));
  }
  return json{
      {"version", "1.0"},
      {"added_tokens",
       json::array({json{{"id", 259}, {"content", "<|end|>"}, {"special", true}},
                    json{{"id", 260}, {"content", "<x>"}, {"special", false}}})},
      {"normalizer", json{{"type", "NFC"}}},
      {"pre_tokenizer",
       json{{"type", "Sequence"},
            {"pretokenizers",
             json::array({json{{"type", "Split"},
                               {"pattern", json{{"Regex", kQwenPattern}}},
                               {"behavior", "Isolated"},
                               {"invert", false}},
                          json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"decoder", json{{"type", "ByteLevel"}}},
      {"model", json{{"type", "BPE"}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}}}};
}

std::unique_ptr<Tokenizer> load_json(const json& j, const std::string& name, Status* st) {
  std::string dir = test::temp_path(name);
  mkdir(dir.c_str(), 0755);
  test::write_text(dir + "/tokenizer.json", j.dump());
  std::unique_ptr<Tokenizer> t;
  *st = Tokenizer::load(dir, &t);
  unlink((dir + "/tokenizer.json").c_str());
  rmdir(dir.c_str());
  return t;
}

TEST(TokenizerLoad, MissingFileIsAnErrorNamingIt) {
  std::unique_ptr<Tokenizer> t;
  Status st = Tokenizer::load("/nonexistent/model", &t);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("/nonexistent/model/tokenizer.json"), std::string::npos) << st.message();
  EXPECT_EQ(t, nullptr);
}

TEST(TokenizerLoad, MalformedFilesAreErrorsNamingTheFile) {
  std::string dir = test::temp_path("bad");
  mkdir(dir.c_str(), 0755);
  std::string path = dir + "/tokenizer.json";
  for (const char* text : {"{not json", "[]", "{\"model\": {\"type\": \"BPE\"}}", ""}) {
    test::write_text(path, text);
    std::unique_ptr<Tokenizer> t;
    Status st = Tokenizer::load(dir, &t);
    EXPECT_FALSE(st.is_ok()) << text;
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  }
  unlink(path.c_str());
  rmdir(dir.c_str());

  json j = tiny_tokenizer(false);
  j["model"]["merges"].push_back(json::array({"q", "zz"}));
  Status st;
  EXPECT_EQ(load_json(j, "badmerge", &st), nullptr);
  EXPECT_EQ(st.code(), Code::kCorruption);
  EXPECT_NE(st.message().find("missing from vocab"), std::string::npos) << st.message();

  j = tiny_tokenizer(false);
  j["model"]["type"] = "Unigram";
  EXPECT_EQ(load_json(j, "unigram", &st), nullptr);
  EXPECT_EQ(st.code(), Code::kUnsupported);

  j = tiny_tokenizer(false);
  j["model"]["byte_fallback"] = true;
  EXPECT_EQ(load_json(j, "fallback", &st), nullptr);
  EXPECT_EQ(st.code(), Code::kUnsupported);
}

TEST(TokenizerBpe, MergesInEitherStoredFormGiveTheSameIds) {
  Status st;
  auto a = load_json(tiny_tokenizer(false), "arrays", &st);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  auto s = load_json(tiny_tokenizer(true), "strings", &st);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  // "abcc": a+b (rank 0) then ab+c (rank 1) then c alone: the pair c+c is
  // never formed because the first c was merged away first.
  EXPECT_EQ(a->encode("abcc"), (Ids{257, 'c'}));
  EXPECT_EQ(a->encode("ccab"), (Ids{258, 256}));
  EXPECT_EQ(a->encode("abc<|end|>cc<x>"), (Ids{257, 259, 258, 260}));
  EXPECT_EQ(a->encode("<|end|>", /*parse_special=*/false), (Ids{'<', '|', 'e', 'n', 'd', '|', '>'}));
  EXPECT_EQ(a->encode("<x>", /*parse_special=*/false), (Ids{260}));
  for (const char* text : {"abcc", "ccab", "abcabccc", "a b c", "<|end|><x>abc"}) EXPECT_EQ(a->encode(text), s->encode(text));
  EXPECT_EQ(a->vocab_size(), 261);
  EXPECT_EQ(a->decode(a->encode("abc<|end|>cc")), "abc<|end|>cc");
}

TEST(TokenizerBpe, RankOrderNotLeftToRight) {
  // With "c c" ranked before "a b" the result of "abcc" changes: merges go by
  // rank over the whole word, not greedily from the left.
  json j = tiny_tokenizer(false);
  j["model"]["merges"] = json::array({json::array({"c", "c"}), json::array({"a", "b"}), json::array({"ab", "c"})});
  Status st;
  auto t = load_json(j, "rank", &st);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(t->encode("abcc"), (Ids{256, 258}));
  EXPECT_EQ(t->encode("abc"), (Ids{257}));
}

TEST(TokenizerQwen3, KnownIdsAndSpecialTokens) {
  const Tokenizer& t = test::qwen3();
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.encode("Hello world!"), (Ids{9707, 1879, 0}));
  EXPECT_EQ(t.encode("<|im_start|>user\nhi<|im_end|>"), (Ids{151644, 872, 198, 6023, 151645}));
  EXPECT_EQ(t.encode("12345"), (Ids{16, 17, 18, 19, 20})) << "digits are never grouped";
  EXPECT_EQ(t.token_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.token_id("<think>"), 151667);
  EXPECT_EQ(t.token_id("Ġworld"), 1879);
  EXPECT_FALSE(t.token_id("no such token").has_value());
  EXPECT_EQ(t.stop_tokens(), (Ids{151645, 151643}));
  EXPECT_TRUE(t.encode("").empty());
}

// Issue 34: a server thread tokenises whatever its clients send and keeps its
// word cache; it was bounded in words only (128k words of up to 256 bytes).
// 60k distinct 64-letter words would hold over 14 MiB; the cache starts over
// at about 8 MiB instead.
TEST(TokenizerQwen3, TheWordCacheIsBoundedInBytes) {
  const Tokenizer& t = test::qwen3();
  std::mt19937 rng(34);
  size_t most = 0;
  for (int round = 0; round < 6; ++round) {
    std::string text;
    for (int w = 0; w < 10000; ++w) {
      text += ' ';
      for (int i = 0; i < 64; ++i) text += static_cast<char>('a' + rng() % 26);
    }
    EXPECT_FALSE(t.encode(text).empty());
    most = std::max(most, Tokenizer::word_cache_bytes());
  }
  EXPECT_GT(most, size_t{4} << 20) << "the cache was not used";
  EXPECT_LE(most, size_t{8} << 20);
}

TEST(TokenizerQwen3, ParseSpecialFalseKeepsSpecialTokensAsText) {
  const Tokenizer& t = test::qwen3();
  Ids plain = t.encode("<|im_end|>", false);
  EXPECT_GT(plain.size(), 1u);
  for (int32_t id : plain) EXPECT_FALSE(t.is_added(id));
  EXPECT_EQ(t.decode(plain), "<|im_end|>");
  // Non-special added tokens are still atomic, as in HF.
  EXPECT_EQ(t.encode("<think>x</think>", false), (Ids{151667, 87, 151668}));
}

TEST(TokenizerQwen3, NfcIsAppliedBeforeSplitting) {
  const Tokenizer& t = test::qwen3();
  EXPECT_EQ(t.encode("cafe\xCC\x81"), t.encode("caf\xC3\xA9"));
  EXPECT_EQ(t.decode(t.encode("cafe\xCC\x81")), "caf\xC3\xA9");
  // Hangul jamo compose into a syllable.
  EXPECT_EQ(t.encode("\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB"), t.encode("\xED\x95\x9C"));
}

TEST(TokenizerQwen3, InvalidUtf8IsRepairedLikeALossyString) {
  const Tokenizer& t = test::qwen3();
  EXPECT_EQ(t.encode("a\xFF" "b\xE4\xBD"), t.encode("a\xEF\xBF\xBD" "b\xEF\xBF\xBD"));
}

TEST(TokenizerQwen3, LongWhitespaceRunsRoundTrip) {
  const Tokenizer& t = test::qwen3();
  for (std::string s : {std::string(200000, ' ') + "x", std::string(50000, '\n'), std::string(30000, '\t') + "\n"}) {
    Ids ids = t.encode(s);
    EXPECT_EQ(t.decode(ids), s);
  }
}

TEST(TokenizerQwen3, EncodeSplitsExactlyAtAddedTokenBoundaries) {
  const Tokenizer& t = test::qwen3();
  std::string text = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n  Hi\n\n<|im_end|>\n<|im_start|>assistant\n";
  for (size_t o = 0; o < text.size(); ++o) {
    bool boundary = text.compare(o, 12, "<|im_start|>") == 0 || text.compare(o, 10, "<|im_end|>") == 0 ||
                    (o >= 10 && text.compare(o - 10, 10, "<|im_end|>") == 0);
    if (!boundary) continue;
    Ids whole = t.encode(text), left = t.encode(text.substr(0, o)), right = t.encode(text.substr(o));
    left.insert(left.end(), right.begin(), right.end());
    EXPECT_EQ(whole, left) << "offset " << o;
  }
}

TEST(TokenizerQwen3, DecodeCheckedNamesTheBadId) {
  const Tokenizer& t = test::qwen3();
  std::string out;
  Ids bad{9707, 999999};
  Status st = t.decode_checked(bad, &out);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("999999"), std::string::npos);
  Ids neg{-1};
  EXPECT_FALSE(t.decode_checked(neg, &out).is_ok());
  Ids good{9707};
  ASSERT_TRUE(t.decode_checked(good, &out).is_ok());
  EXPECT_EQ(out, "Hello");
}

TEST(TokenizerQwen3, StreamDecoderNeverEmitsHalfACharacter) {
  const Tokenizer& t = test::qwen3();
  Ids ids = t.encode("ok \xF0\x9F\x8E\x89 done");  // the emoji takes three byte-level tokens
  StreamDecoder sd(t);
  std::string all;
  for (int32_t id : ids) {
    std::string piece = sd.push(id);
    EXPECT_TRUE(utf8::is_valid(piece));
    all += piece;
  }
  EXPECT_EQ(sd.pending_bytes(), 0u);
  all += sd.flush();
  EXPECT_EQ(all, "ok \xF0\x9F\x8E\x89 done");

  // A dangling lead byte is held, then flushed as U+FFFD.
  StreamDecoder sd2(t);
  int32_t lead = *t.token_id(byte_level::from_bytes("\xF0"));
  EXPECT_EQ(sd2.push(lead), "");
  EXPECT_EQ(sd2.pending_bytes(), 1u);
  EXPECT_EQ(sd2.flush(), "\xEF\xBF\xBD");
  // ...or replaced as soon as the next byte proves it invalid.
  EXPECT_EQ(sd2.push(lead), "");
  EXPECT_EQ(sd2.push(*t.token_id("a")), "\xEF\xBF\xBD" "a");
}

TEST(TokenizerQwen3, ConcurrentEncodesAgree) {
  const Tokenizer& t = test::qwen3();
  std::vector<std::string> lines = test::split_lines(test::read_text(test::source_dir() + "/tests/tokenizer/data/corpus.jsonl"));
  lines.resize(std::min<size_t>(lines.size(), 1500));
  std::vector<std::string> texts;
  for (const auto& l : lines) texts.push_back(json::parse(l).get<std::string>());
  std::vector<Ids> want;
  for (const auto& s : texts) want.push_back(t.encode(s));
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (size_t i = 0; i < texts.size(); ++i)
        if (t.encode(texts[(i * 7 + k * 131) % texts.size()]) != want[(i * 7 + k * 131) % texts.size()]) ++bad[k];
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(bad[k], 0);
}

TEST(SplitRegex, WhitespaceFollowsOnigurumaNotPcreOrJavaScript) {
  std::string translated;
  ASSERT_TRUE(translate_pattern(kQwenPattern, &translated).is_ok());
  EXPECT_EQ(translated.find("\\s"), std::string::npos);
  EXPECT_EQ(translated.find("\\S"), std::string::npos);
  SplitRegex re;
  ASSERT_TRUE(SplitRegex::compile(kQwenPattern, &re).is_ok());
  EXPECT_EQ(pieces(re, "Hello world's 123  x\n\n  y"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", "1", "2", "3", " ", " x", "\n\n", " ", " y"}));
  // U+0085 is a space (the run before it keeps all three spaces), U+FEFF and
  // U+180E are not.
  EXPECT_EQ(pieces(re, "   \xC2\x85" "abc"), (std::vector<std::string>{"   ", "\xC2\x85" "abc"}));
  EXPECT_EQ(pieces(re, "   \xEF\xBB\xBF" "abc"), (std::vector<std::string>{"  ", " \xEF\xBB\xBF", "abc"}));
  EXPECT_EQ(pieces(re, "   \xE1\xA0\x8E" "abc"), (std::vector<std::string>{"  ", " \xE1\xA0\x8E", "abc"}));
  // Contractions are case-insensitive with Unicode folding: 'ſ (long s) counts.
  EXPECT_EQ(pieces(re, "IT'S it\xC5\xBF"), (std::vector<std::string>{"IT", "'S", " it\xC5\xBF"}));
  EXPECT_EQ(pieces(re, "x'\xC5\xBFt"), (std::vector<std::string>{"x", "'\xC5\xBF", "t"}));
  std::string bad;
  EXPECT_FALSE(translate_pattern("[^\\S]", &bad).is_ok());
  EXPECT_FALSE(SplitRegex::compile("(unclosed", &re).is_ok());
}

TEST(SplitRegex, Qwen35VariantKeepsCombiningMarksInLetterRuns) {
  // Qwen3.5's pattern adds \p{M} to the letter run and removes it from the
  // punctuation class; Qwen3's splits a mark off the preceding letter
  // (NFC cannot compose x + U+0301, so the mark survives normalisation).
  const char kQwen35[] =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  SplitRegex q3, q35;
  ASSERT_TRUE(SplitRegex::compile(kQwenPattern, &q3).is_ok());
  ASSERT_TRUE(SplitRegex::compile(kQwen35, &q35).is_ok());
  const std::string text = "x\xCC\x81y \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87";
  EXPECT_EQ(pieces(q3, text), (std::vector<std::string>{"x", "\xCC\x81y", " \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8",
                                                        "\xE0\xA5\x8D\xE0\xA4\xA4", "\xE0\xA5\x87"}));
  EXPECT_EQ(pieces(q35, text), (std::vector<std::string>{"x\xCC\x81y", " \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87"}));
}

TEST(Utf8, RepairUsesMaximalSubparts) {
  EXPECT_EQ(utf8::repaired("a\xF0\x9F\x8E" "b"), "a\xEF\xBF\xBD" "b");            // truncated 4-byte: one U+FFFD
  EXPECT_EQ(utf8::repaired("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");               // overlong: each byte
  EXPECT_EQ(utf8::repaired("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_TRUE(utf8::is_valid("\xE2\x82\xAC"));
  EXPECT_FALSE(utf8::is_valid("\xE2\x82"));
  std::string out;
  EXPECT_EQ(utf8::repair("ab\xE2\x82", false, &out), 2u);
  EXPECT_EQ(out, "ab");
}

}  // namespace
}  // namespace sb
