// `statebank run --logits-out` end to end on a tiny generated model, the
// statebank side of the llama.cpp cross-check (tools/xcheck): the file holds
// the requested prompt rows then one row per decode step; a run restored from
// the bank (--restore) writes bit for bit what the plain run writes; a prompt
// split across decode (--split-at) agrees within fp32 noise (the recurrent
// form against the chunked one); bad combinations fail with exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/cli/statebank_cli.h"
#include "tests/util/models.h"
#include "tests/util/temp_dir.h"

namespace {

namespace fs = std::filesystem;

using sb::testing::Outcome;
using sb::testing::read_file;
using sb::testing::run_statebank;

std::vector<float> read_floats(const fs::path& p) {
  const std::string bytes = read_file(p.string());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::string ids(int n) {
  std::mt19937 rng(5);
  std::string s;
  for (int i = 0; i < n; ++i) s.append(i ? "," : "").append(std::to_string(rng() % 151643));
  return s;
}

class RunLogits : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = sb::testing::tiny_checkpoint(sb::Arch::kQwen35, 1, sb::DType::kF32);
    vocab_ = 151936;
  }
  // Runs `run` on the model with the given prompt and flags; returns the rows.
  std::vector<float> logits(const std::string& prompt, const std::string& flags, Outcome* outcome) {
    const fs::path file = dir_.file("logits.bin");
    fs::remove(file);
    *outcome = run_statebank(dir_, "run --model '" + model_ + "' --prompt-ids " + prompt +
                                       " --max-tokens 4 --ids --logits-out '" + file.string() + "' " + flags);
    return read_floats(file);
  }
  sb::testing::TempDir dir_;
  std::string model_;
  size_t vocab_ = 0;
};

TEST_F(RunLogits, RowsRestoreAndSplit) {
  const std::string prompt = ids(300);
  Outcome plain, rows, restored, split;
  const std::vector<float> a = logits(prompt, "", &plain);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(a.size(), 4 * vocab_);  // the last prompt row, then 3 decode steps

  const std::vector<float> r = logits(prompt, "--logits-rows 0,-1", &rows);
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  ASSERT_EQ(r.size(), 5 * vocab_);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), r.begin() + vocab_)) << "rows of an all-rows prefill differ";
  EXPECT_FALSE(std::equal(r.begin(), r.begin() + vocab_, r.begin() + vocab_)) << "row 0 repeats the last row";
  EXPECT_EQ(rows.out, plain.out);

  const std::vector<float> b = logits(prompt, "--restore --block-tokens 256", &restored);
  ASSERT_EQ(restored.exit_code, 0) << restored.err;
  EXPECT_NE(restored.err.find("restored 256 from ram"), std::string::npos) << restored.err;
  EXPECT_EQ(restored.out, plain.out);
  ASSERT_EQ(b.size(), a.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "a restored run is not bit-identical";

  const std::vector<float> c = logits(prompt, "--split-at 200", &split);
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_EQ(split.out, plain.out);
  ASSERT_EQ(c.size(), a.size());
  float scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(a[i]));
    diff = std::max(diff, std::fabs(a[i] - c[i]));
  }
  EXPECT_LT(diff / scale, 1e-4f);
  EXPECT_GT(diff, 0.0f) << "--split-at did not feed the rest through decode";
}

TEST_F(RunLogits, BadCombinationsFail) {
  Outcome o;
  (void)logits(ids(300), "--split-at 300", &o);
  EXPECT_EQ(o.exit_code, 2);
  (void)logits(ids(300), "--split-at 10 --restore", &o);
  EXPECT_EQ(o.exit_code, 2);
  (void)logits(ids(300), "--restore --logits-rows 0,-1", &o);
  EXPECT_EQ(o.exit_code, 2);
  (void)logits(ids(100), "--restore", &o);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("nothing was restored"), std::string::npos) << o.err;
  (void)logits(ids(10), "--logits-rows 10", &o);
  EXPECT_EQ(o.exit_code, 2);
}

}  // namespace
