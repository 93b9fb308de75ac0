// `statebank bench agents` end to end on a tiny generated model: both
// captured sessions (Claude Code's Messages bodies, Codex's Responses bodies)
// replay with every turn's bank reply equal to its bypass twin, each session
// starting cold on an empty bank and its later turns restoring; and broken
// session directories fail with one clear line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string item;
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

struct Outcome {
  int exit_code = -1;
  std::string err;
};

Outcome run_statebank(const fs::path& dir, const std::string& args) {
  const fs::path err = dir / "stderr.txt";
  const std::string cmd =
      "'" SB_STATEBANK_BIN "' " + args + " >'" + (dir / "stdout.txt").string() + "' 2>'" + err.string() + "'";
  const int st = std::system(cmd.c_str());
  Outcome r;
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = read_text(err);
  return r;
}

fs::path agents_data(const std::string& name) {
  const char* src = std::getenv("SB_SOURCE_DIR");
  if (!src) ADD_FAILURE() << "SB_SOURCE_DIR is not set (run through ctest)";
  return fs::path(src ? src : ".") / "tests/data/agents" / name;
}

class BenchAgentsTest : public ::testing::Test {
 protected:
  sb::testing::TempDir temp_;
  const fs::path dir_{temp_.path()};
  const std::string model_ = sb::testing::tiny_checkpoint(sb::Arch::kQwen35, /*seed=*/0);
};

TEST_F(BenchAgentsTest, BothSessionsRestoreLaterTurnsEqualToBypass) {
  const fs::path out = dir_ / "out";
  const std::string args = "bench agents --model '" + model_ + "' --session '" +
                           agents_data("claude-code-2.1.332").string() + "' --session '" +
                           agents_data("codex-0.171.0").string() + "' --max-tokens 4 --no-plots --report '" +
                           (out / "agents.md").string() + "'";
  const Outcome r = run_statebank(dir_, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const std::string md = read_text(out / "agents.md");
  EXPECT_NE(md.find("tools/statebank.sh bench agents --model"), std::string::npos) << md;
  EXPECT_NE(md.find("--no-plots"), std::string::npos) << md;
  EXPECT_EQ(md.find("**no**"), std::string::npos) << md;
  EXPECT_FALSE(fs::exists(out / "agents.png"));

  std::stringstream lines(read_text(out / "agents.csv"));
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  std::map<std::string, size_t> col;
  const auto header = split(line, ',');
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* name : {"agent", "turn", "phase", "prompt_tokens", "served", "restored", "stored", "ttft_bank_ms",
                           "ttft_bypass_ms", "ratio", "equal"})
    ASSERT_TRUE(col.count(name)) << "no column " << name;
  std::map<std::string, int> turns_of;
  while (std::getline(lines, line)) {
    const auto row = split(line, ',');
    ASSERT_EQ(row.size(), header.size()) << line;
    const std::string& agent = row[col["agent"]];
    EXPECT_EQ(std::stoi(row[col["turn"]]), ++turns_of[agent]) << line;
    EXPECT_EQ(row[col["equal"]], "1") << line;
    EXPECT_GT(std::stoll(row[col["prompt_tokens"]]), 1000) << line;
    if (row[col["turn"]] == "1") {  // each session starts on an empty bank
      EXPECT_EQ(row[col["phase"]], "cold") << line;
      EXPECT_EQ(row[col["served"]], "cold") << line;
      EXPECT_EQ(row[col["restored"]], "0") << line;
      EXPECT_GT(std::stoll(row[col["stored"]]), 0) << line;
    } else {
      EXPECT_EQ(row[col["served"]], "ram") << line;
      EXPECT_GT(std::stoll(row[col["restored"]]), 0) << line;
    }
  }
  EXPECT_EQ(turns_of["Claude Code 2.1.332"], 2);
  EXPECT_EQ(turns_of["Codex CLI 0.171.0"], 3);
}

// The cross-session rows: a new session's first turn on the bank the first
// session left. Claude Code in the same directory and Codex in another share
// their system prompt and tools; Claude Code in another directory shares
// less than a snapshot's worth (its memory path precedes the tools).
TEST_F(BenchAgentsTest, NewSessionRowsRestoreTheSharedPrompt) {
  const fs::path out = dir_ / "sessions";
  const Outcome r = run_statebank(
      dir_, "bench agents --model '" + model_ + "' --session '" + agents_data("claude-code-2.1.332-sessions").string() +
                "' --session '" + agents_data("codex-0.171.0-sessions").string() +
                "' --max-tokens 2 --no-plots --csv '" + (out / "agents.csv").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::stringstream lines(read_text(out / "agents.csv"));
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  std::map<std::string, int64_t> restored;  // file -> restored tokens, new-session rows
  int cold = 0;
  while (std::getline(lines, line)) {
    const auto row = split(line, ',');
    ASSERT_EQ(row.size(), 13u) << line;
    EXPECT_EQ(row[12], "1") << line;  // equal to bypass
    if (row[4] == "cold") ++cold;
    if (row[4] == "new session") restored[row[2] + "/" + row[3]] = std::stoll(row[7]);
  }
  EXPECT_EQ(cold, 2);
  ASSERT_EQ(restored.size(), 3u);
  EXPECT_GE(restored["1/session2-same-dir-turn1.json"], 8192);
  EXPECT_GE(restored["1/session2-other-dir-turn1.json"], 8192);
  EXPECT_LT(restored["1/session3-other-dir-turn1.json"], 2048);
}

TEST_F(BenchAgentsTest, BrokenSessionsFailWithOneLine) {
  const fs::path s = dir_ / "session";
  fs::create_directories(s);
  fs::copy_file(agents_data("codex-0.171.0") / "turn.json", s / "turn.json");
  write_text(s / "empty.json", "{}");
  // Each manifest, and what its one error line must name.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not a JSON object"},
      {R"({"protocol": "grpc", "turns": ["turn.json"]})", "\"protocol\" must be"},
      {R"({"protocol": "responses", "turns": []})", "\"turns\" must be"},
      {R"({"protocol": "responses", "turns": ["missing.json"]})", "missing.json does not exist"},
      {R"({"protocol": "responses", "turns": ["turn.json"], "next_sessions": "turn.json"})",
       "\"next_sessions\" must be an array"},
      {R"({"protocol": "messages", "turns": ["turn.json"]})", "turn.json: "},  // a Responses body as Messages
      {R"({"protocol": "responses", "turns": ["empty.json"]})", "empty.json: 'input' is required"}};
  for (const auto& [manifest, why] : cases) {
    write_text(s / "session.json", manifest);
    const Outcome r =
        run_statebank(dir_, "bench agents --model '" + model_ + "' --no-plots --session '" + s.string() + "'");
    EXPECT_EQ(r.exit_code, 2) << manifest;
    // Progress lines, then the error: the last line, naming the fault.
    const auto lines = split(r.err, '\n');
    ASSERT_FALSE(lines.empty()) << manifest;
    EXPECT_EQ(lines.back().rfind("statebank bench: ", 0), 0u) << r.err;
    EXPECT_NE(lines.back().find(why), std::string::npos) << manifest << ": " << r.err;
  }
  const Outcome r = run_statebank(dir_, "bench agents --session '" + (dir_ / "nowhere").string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("session.json"), std::string::npos) << r.err;
}

}  // namespace
