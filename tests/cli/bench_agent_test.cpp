// `statebank bench agent` end to end on a tiny generated model: the report
// and the CSV exist, requests restored from RAM and from SSD (after the
// restart) skip a prefix and give the bypass twin's tokens, and without
// gnuplot the bench still succeeds and says why there are no plots; and a
// broken restore (the engine's test hook) is caught by the bench's own
// comparison with the bypass twin.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/agent_report.h"
#include "bench/agent_workload.h"
#include "bench/load_workload.h"
#include "engine/engine.h"
#include "model/gen_model.h"
#include "model/model.h"
#include "runtime/cpu/backend.h"
#include "tests/util/models.h"
#include "tests/util/redis_server.h"
#include "tests/util/state_edit.h"
#include "tests/util/temp_dir.h"

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string item;
  while (std::getline(in, item, sep)) out.push_back(item);
  if (!line.empty() && line.back() == sep) out.push_back("");
  return out;
}

// A CSV file: its columns by name and its rows, each checked to have one
// field per column.
struct Csv {
  std::map<std::string, size_t> col;
  std::vector<std::vector<std::string>> rows;
};

Csv read_csv(const fs::path& path) {
  Csv c;
  std::stringstream lines(read_text(path));
  std::string line;
  if (!std::getline(lines, line)) {
    ADD_FAILURE() << path << " is empty";
    return c;
  }
  const auto header = split(line, ',');
  for (size_t i = 0; i < header.size(); ++i) c.col[header[i]] = i;
  while (std::getline(lines, line)) {
    c.rows.push_back(split(line, ','));
    EXPECT_EQ(c.rows.back().size(), header.size()) << line;
  }
  return c;
}

struct Outcome {
  int exit_code = -1;
  std::string err;
};

// Runs the statebank binary with `args` and the environment prefix `env`.
Outcome run_statebank(const fs::path& dir, const std::string& env, const std::string& args) {
  const fs::path err = dir / "stderr.txt";
  const std::string cmd = env + " '" SB_STATEBANK_BIN "' " + args + " >'" + (dir / "stdout.txt").string() + "' 2>'" +
                          err.string() + "'";
  const int st = std::system(cmd.c_str());
  Outcome r;
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = read_text(err);
  return r;
}

class BenchAgentTest : public ::testing::Test {
 protected:
  sb::testing::TempDir temp_;
  const fs::path dir_{temp_.path()};
};

TEST_F(BenchAgentTest, TinyRunReportsRestoresEqualToBypass) {
  // A PATH with dd but without gnuplot: the bench must skip the plots and
  // say so, and still measure the dd baseline.
  const fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  fs::create_symlink("/bin/dd", bin / "dd");
  const fs::path out = dir_ / "out";
  const std::string args = "bench agent --preset tiny --cache-dir '" + (dir_ / "models").string() + "' --work-dir '" +
                           (dir_ / "work").string() + "' --report '" + (out / "agent.md").string() +
                           "' --prefix-tokens 300 --project-tokens 150 --message-tokens 20 --reply-tokens 6"
                           " --projects 2 --turns 2 --turns-after 1 --block-tokens 64 --snapshot-every 128";
  const Outcome r = run_statebank(dir_, "PATH='" + bin.string() + "'", args);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const std::string md = read_text(out / "agent.md");
  ASSERT_FALSE(md.empty());
  EXPECT_NE(md.find("## Headline"), std::string::npos);
  EXPECT_NE(md.find("tools/statebank.sh bench agent --preset tiny"), std::string::npos) << md;
  EXPECT_NE(md.find("gnuplot is not installed"), std::string::npos) << md;
  EXPECT_NE(md.find("| 6 of 6 |"), std::string::npos) << "the verdict line should count 6 equal bank responses\n" << md;
  EXPECT_NE(md.find("iflag=direct"), std::string::npos) << "the dd baseline should have run\n" << md;
  EXPECT_FALSE(fs::exists(out / "agent_ttft.png"));

  auto [col, rows] = read_csv(out / "agent.csv");
  for (const char* name : {"request", "phase", "turn", "project", "mode", "served", "ttft_ms", "restore_point",
                           "prefill_tokens", "bytes_read", "equal_to_bypass", "tokens"})
    ASSERT_TRUE(col.count(name)) << "no column " << name;

  // 2 projects x (2 + 1) turns, each a bank row and its bypass twin.
  ASSERT_EQ(rows.size(), 12u);
  std::map<std::string, std::string> bypass_tokens;
  for (const auto& row : rows)
    if (row[col["mode"]] == "bypass") bypass_tokens[row[col["request"]]] = row[col["tokens"]];
  ASSERT_EQ(bypass_tokens.size(), 6u);

  int from_ram = 0, from_ssd = 0;
  for (const auto& row : rows) {
    if (row[col["mode"]] != "bank") continue;
    const std::string& served = row[col["served"]];
    const auto tokens = row[col["tokens"]];
    EXPECT_EQ(split(tokens, ' ').size(), 6u) << tokens;
    EXPECT_EQ(tokens, bypass_tokens[row[col["request"]]]) << "request " << row[col["request"]];
    EXPECT_EQ(row[col["equal_to_bypass"]], "1");
    if (served == "ram" || served == "ssd" || served == "mixed") {
      EXPECT_GT(std::stoll(row[col["restore_point"]]), 0) << "request " << row[col["request"]];
      EXPECT_GT(std::stoull(row[col["bytes_read"]]), 0u);
    }
    if (served == "ram") ++from_ram;
    if (served == "ssd") {
      EXPECT_EQ(row[col["phase"]], "after");
      ++from_ssd;
    }
  }
  // Turn 0 of project 1 restores the shared prefix, turn 1 of each project
  // its previous prompt: from RAM. The first request after the restart can
  // only be served from disk.
  EXPECT_GE(from_ram, 3);
  EXPECT_GE(from_ssd, 1);
  // The first request of all found an empty bank.
  EXPECT_EQ(rows[0][col["served"]], "cold");
  EXPECT_EQ(rows[0][col["restore_point"]], "0");

  // The bank directory is removed at the end (no --keep-bank).
  std::error_code ec;
  EXPECT_TRUE(!fs::exists(dir_ / "work", ec) || fs::is_empty(dir_ / "work", ec));
}

// With --remote: a replica (empty RAM, no SSD) restores from Redis what the
// first server published; its rows are equal to their twins and count the
// bytes that crossed the socket.
TEST_F(BenchAgentTest, ReplicaRestoresFromRedis) {
  sb::testing::RedisServer redis;
  const fs::path out = dir_ / "out";
  const std::string args = "bench agent --preset tiny --cache-dir '" + (dir_ / "models").string() + "' --work-dir '" +
                           (dir_ / "work").string() + "' --report '" + (out / "agent.md").string() +
                           "' --prefix-tokens 300 --project-tokens 150 --message-tokens 20 --reply-tokens 6"
                           " --projects 2 --turns 1 --turns-after 1 --block-tokens 64 --snapshot-every 128 --no-plots"
                           " --remote " + redis.url();
  const Outcome r = run_statebank(dir_, "", args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = read_text(out / "agent.md");
  EXPECT_NE(md.find("## Remote vs SSD vs cold"), std::string::npos) << md;
  EXPECT_NE(md.find("| Redis, on the replica | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 6 of 6 |"), std::string::npos) << md;

  auto [col, rows] = read_csv(out / "agent.csv");
  ASSERT_TRUE(col.count("wire_received"));
  int from_remote = 0;
  for (const auto& row : rows) {
    if (row[col["mode"]] != "bank") continue;
    EXPECT_EQ(row[col["equal_to_bypass"]], "1") << "request " << row[col["request"]];
    if (row[col["served"]] == "remote") {
      ++from_remote;
      EXPECT_EQ(row[col["phase"]], "replica");
      EXPECT_GT(std::stoull(row[col["wire_received"]]), std::stoull(row[col["bytes_read"]]));
    }
  }
  EXPECT_EQ(from_remote, 1);  // the replica's first request; the second mixes in what it promoted
  // The run's keys are in Redis, under their own prefix, with an expiry.
  const auto keys = redis.keys("statebank-bench-*");
  ASSERT_FALSE(keys.empty());
  EXPECT_GT(redis.command({"TTL", keys[0]}).integer, 0);
}

// `statebank bench load` end to end on the tiny preset: the report has its
// tables and its CSV one row per client count (all rounds), per round and
// client count, and per step budget (tokens and latency ratio).
TEST_F(BenchAgentTest, TinyLoadRunWritesItsReport) {
  const fs::path out = dir_ / "out";
  const std::string args = "bench load --preset tiny --cache-dir '" + (dir_ / "models").string() + "' --report '" +
                           (out / "load.md").string() +
                           "' --clients 1,2 --prompt-tokens 16 --decode-tokens 6 --requests 1 --rounds 2 --max-running 4"
                           " --batch-tokens 32 --long-prompt-tokens 200 --long-decoders 2 --idle-tokens 4"
                           " --long-batch-tokens 64 --long-itl-ratios 0,2.5 --no-plots";
  const Outcome r = run_statebank(dir_, "", args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = read_text(out / "load.md");
  EXPECT_NE(md.find("tools/statebank.sh bench load --preset tiny"), std::string::npos) << md;
  EXPECT_NE(md.find("| 64 | 0 (off) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 64 | 2.5 |"), std::string::npos) << md;
  const std::string csv = read_text(out / "load.csv");
  size_t clients = 0, rounds = 0, budgets = 0;
  for (size_t at = 0; (at = csv.find("\nclients,", at)) != std::string::npos; ++at) ++clients;
  for (size_t at = 0; (at = csv.find("\nclients_round,", at)) != std::string::npos; ++at) ++rounds;
  for (size_t at = 0; (at = csv.find("\nlong_prefill,", at)) != std::string::npos; ++at) ++budgets;
  EXPECT_EQ(clients, 2u) << csv;
  EXPECT_EQ(rounds, 4u) << csv;
  EXPECT_EQ(budgets, 2u) << csv;
  // The 1-client row's own ratio in each round is 1; the pooled tokens are
  // both rounds' (2 clients x 1 request x 6 tokens each round).
  EXPECT_NE(md.find("| 1.00x | 1.00x, 1.00x |"), std::string::npos) << md;
  EXPECT_NE(csv.find("\nclients,2,,,24,"), std::string::npos) << csv;
  // Decode tokens: those of decode-only steps, for one client every token
  // after the first (5 each round; with two clients a prompt that arrives a
  // step late shares a step with the other's decode).
  const size_t one = csv.find("\nclients,1,");
  ASSERT_NE(one, std::string::npos) << csv;
  const std::string line = csv.substr(one + 1, csv.find('\n', one + 1) - one - 1);
  EXPECT_NE(line.find(",0,10,"), std::string::npos) << line;
}

// The "vs 1" columns and the target line divide by the 1-client run wherever
// the sweep has it (here last), and say "-" and nothing without one.
TEST(LoadReport, RatiosAreToTheOneClientRunWhereverItStands) {
  // Wall tokens/s half the decode tokens/s, so that a ratio taken from the
  // wrong one shows.
  auto run = [](int clients, int round, double tps) {
    sb::ClientsRun x;
    x.clients = clients;
    x.round = round;
    x.decode_tokens_per_s = tps;
    x.tokens_per_s = tps / (clients == 1 ? 1 : 2);
    return x;
  };
  sb::LoadResult r;
  r.clients = {run(4, 0, 30), run(1, 0, 10)};
  r.rounds = {run(4, 1, 24), run(1, 1, 8), run(4, 2, 36), run(1, 2, 12)};
  const std::string md = sb::load_markdown(r, sb::LoadOptions{}, sb::LoadReportContext{});
  EXPECT_NE(md.find("| 4 | 30.00 | 3.00x | 3.00x, 3.00x | 15.00 | 1.50x |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | 10.00 | 1.00x | 1.00x, 1.00x | 10.00 | 1.00x |"), std::string::npos) << md;
  EXPECT_NE(md.find("4 clients reach at least 4x the aggregate decode throughput of one: 3.00x, **not met** (over "
                    "the wall time, the prompts' prefill included: 1.50x)"),
            std::string::npos)
      << md;
  r.clients = {run(4, 0, 30), run(2, 0, 20)};
  r.rounds = {run(4, 1, 30), run(2, 1, 20)};
  const std::string without = sb::load_markdown(r, sb::LoadOptions{}, sb::LoadReportContext{});
  EXPECT_NE(without.find("| 4 | 30.00 | - | - | 15.00 | - |"), std::string::npos) << without;
  EXPECT_EQ(without.find("Target: 4 clients"), std::string::npos) << without;
}

TEST_F(BenchAgentTest, BadArgumentsFailWithOneLine) {
  for (const std::string args : {"bench agent --turns 0", "bench agent --prefix-tokens x", "bench nope",
                                 "bench agent --model /nonexistent/dir", "bench agent --remote http://x",
                                 "bench load --clients 0", "bench load --max-running 8 --batch-tokens 8",
                                 "bench load --itl-ratio 0.5", "bench load --long-itl-ratios 0,1",
                                 "bench load --clients 2.5", "bench load --rounds 0"}) {
    const Outcome r = run_statebank(dir_, "", args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err.rfind("statebank bench: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(BenchAgentTest, BrokenRestoreIsReportedAsMismatch) {
  const std::string model_dir = sb::testing::tiny_checkpoint(sb::Arch::kQwen35, /*seed=*/0);
  std::unique_ptr<sb::Model> model;
  ASSERT_TRUE(sb::Model::load(model_dir, sb::RuntimeOptions{}, sb::cpu_kernels_factory(), &model).is_ok());

  sb::AgentWorkloadOptions o;
  o.prefix_tokens = 200;
  o.project_tokens = 70;
  o.message_tokens = 10;
  o.reply_tokens = 4;
  o.projects = 2;
  o.turns = 1;
  o.turns_after = 1;
  o.block_tokens = 64;
  o.snapshot_every = 128;
  o.bank_dir = (dir_ / "bank").string();
  int tampered = 0;
  // Nudge the last row of the first component: a restored state that passed
  // every check but is not what a cold prefill gives.
  o.on_engine = [&](sb::Engine& engine) {
    engine.set_test_hooks(sb::EngineTestHooks{[&](sb::State& restored) {
      ASSERT_FALSE(restored.bytes(0).empty());
      const size_t last = sb::testing::stored_values(restored, 0) - 1;
      sb::testing::set_stored_value(restored, 0, last, sb::testing::stored_value(restored, 0, last) + 0.5f);
      ++tampered;
    }});
  };
  sb::AgentResult result;
  ASSERT_TRUE(sb::run_agent_workload(*model, o, &result).is_ok());
  ASSERT_GT(tampered, 0);
  ASSERT_FALSE(result.mismatches.empty());
  int restored_rows = 0, unequal_rows = 0;
  for (const auto& row : result.rows) {
    if (row.mode != "bank" || row.restore_point == 0) continue;
    ++restored_rows;
    if (!row.equal_to_bypass) ++unequal_rows;
  }
  EXPECT_GT(restored_rows, 0);
  EXPECT_EQ(static_cast<size_t>(unequal_rows), result.mismatches.size());
  const sb::AgentSummary s = sb::summarize(result);
  EXPECT_LT(s.equal, s.requests);
  const std::string md = sb::agent_markdown(result, o, sb::AgentReportContext{});
  EXPECT_NE(md.find("## MISMATCHES"), std::string::npos);
  EXPECT_NE(md.find("**not met**"), std::string::npos);
}

}  // namespace
