// Issue 47, findings 1 and 8: model files are input. A chat template with a
// long expression (in tokenizer_config.json or a GGUF's
// tokenizer.chat_template) ended `serve` with SIGSEGV and no message; a GGUF
// whose token list holds invalid UTF-8 ended it with a JSON library's
// message naming neither the file nor the key. Each must be one error line on
// stderr naming the file and the key, and exit code 2; a healthy copy of the
// same files still starts (so the test sees what it claims to).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/server/serve_process.h"

namespace sb::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

struct Outcome {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string err;     // stderr
};

// `statebank ARGS`, its stderr and exit code; a server that starts instead is
// killed after 60 s (exit 124 from timeout).
Outcome run_statebank(const std::string& args) {
  const std::string cmd = std::string("timeout 60 ") + SB_STATEBANK_BIN + " " + args + " 2>&1 >/dev/null";
  Outcome o;
  const int status = run_shell(cmd, &o.err);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

Outcome serve(const std::string& model) {
  return run_statebank("serve --model " + model + " --port 0 --ssd off --threads 1 --ram-bank 16M --max-running 1");
}

class HostileModelFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("sb_hostile_files");
    model_ = root_ + "/model";
    ASSERT_EQ(gen_model(model_, "qwen3_next", "tiny", 3), 0) << kGenModelFailed;
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // A copy of the model whose tokenizer_config.json holds `tmpl`.
  static std::string with_template(const std::string& name, const std::string& tmpl) {
    const std::string dir = root_ + "/" + name;
    fs::copy(model_, dir, fs::copy_options::recursive);
    fs::remove(dir + "/chat_template.jinja");
    ordered_json cfg = ordered_json::parse(read_all(dir + "/tokenizer_config.json"));
    cfg["chat_template"] = tmpl;
    write_all(dir + "/tokenizer_config.json", cfg.dump());
    return dir;
  }
  static std::string to_gguf(const std::string& dir) {
    const std::string out = dir + ".gguf";
    const Outcome q = run_statebank("quantize " + dir + " " + out + " --type f32");
    EXPECT_EQ(q.exit_code, 0) << q.err;
    return out;
  }
  static std::string root_, model_;
};
std::string HostileModelFiles::root_, HostileModelFiles::model_;

// One line, naming every one of `names`, exit 2.
void expect_one_line_naming(const Outcome& o, const std::vector<std::string>& names) {
  EXPECT_EQ(o.exit_code, 2) << o.err.substr(0, 400);
  ASSERT_FALSE(o.err.empty());
  EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << o.err.substr(0, 400);
  for (const std::string& n : names) EXPECT_NE(o.err.find(n), std::string::npos) << n << " in " << o.err.substr(0, 400);
}

const std::vector<std::pair<std::string, std::string>>& deep_templates() {
  static const std::vector<std::pair<std::string, std::string>> t = {
      {"nots", "{{ " + repeat("not ", 50000) + "1 }}"},
      {"sum", "{{ 1" + repeat(" + 1", 50000) + " }}"},
      {"attrs", "{{ messages" + repeat(".a", 20000) + " }}"},
  };
  return t;
}

TEST_F(HostileModelFiles, ADeepTemplateInTokenizerConfigIsOneLineAndExit2) {
  for (const auto& [name, tmpl] : deep_templates()) {
    SCOPED_TRACE(name);
    const std::string dir = with_template("cfg_" + name, tmpl);
    expect_one_line_naming(serve(dir), {dir + "/tokenizer_config.json", "chat_template", "nested deeper than 200"});
  }
}

TEST_F(HostileModelFiles, ADeepTemplateInAGgufIsOneLineAndExit2) {
  const auto& [name, tmpl] = deep_templates()[1];
  const std::string gguf = to_gguf(with_template("gguf_" + name, tmpl));
  expect_one_line_naming(serve(gguf), {gguf, "tokenizer.chat_template", "nested deeper than 200"});
}

// Token 0 of the Qwen3 vocabulary is "!": in the GGUF token list it is the
// string of length 1 before token 1, '"'. Its byte becomes 0xFF.
TEST_F(HostileModelFiles, InvalidUtf8InAGgufVocabularyIsOneLineNamingTheKey) {
  const std::string healthy = to_gguf(model_);
  const std::string gguf = root_ + "/bad_vocab.gguf";
  std::string bytes = read_all(healthy);
  const std::string one("\x01\0\0\0\0\0\0\0", 8);
  const size_t at = bytes.find(one + "!" + one + "\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 8] = '\xFF';
  write_all(gguf, bytes);
  expect_one_line_naming(serve(gguf), {gguf, "tokenizer.ggml.tokens[0]", "not valid UTF-8"});
  // The same file unpatched loads its vocabulary: the refusal is the byte's doing.
  const Outcome ok = run_statebank("tokenize --model " + healthy + " hello");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST_F(HostileModelFiles, InvalidUtf8InAGgufTemplateIsOneLineNamingTheKey) {
  const std::string healthy = to_gguf(with_template("utf8_tmpl", "{{ 'sb47marker' }}{{ messages[0].content }}"));
  const std::string gguf = root_ + "/bad_template.gguf";
  std::string bytes = read_all(healthy);
  const size_t at = bytes.find("sb47marker");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = '\xC0';
  write_all(gguf, bytes);
  expect_one_line_naming(serve(gguf), {gguf, "tokenizer.chat_template", "not valid UTF-8"});
}

}  // namespace
}  // namespace sb::testing
