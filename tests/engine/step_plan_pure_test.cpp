// plan_step (engine/step_plan.h) as a pure function: tables of running
// sequences and budget states, and the exact slices each step gets. No
// thread, no model: engine_step_plan_test checks the same rules through a
// live engine, and the equivalence tests that no plan changes a bit.
#include "engine/step_plan.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"

namespace sb {
namespace {

PlanSequence decode(int64_t draft = 0) { return PlanSequence{false, 0, 0, 0, false, draft}; }
// A prompt of n tokens consumed up to `at`, its prefill started at `start`.
PlanSequence prompt(int64_t at, int64_t n, int64_t start = 0, bool echo = false) {
  return PlanSequence{at < n, at, n, start, echo};
}

BudgetState ratio_off() { return BudgetState{}; }
BudgetState unmeasured() { return BudgetState{2.0, {}, 0, 0, 0}; }
// Measured costs under which `rows` prefill rows fit beside any decodes:
// (2 - 1) x 10 ms decode-only step x rows / 10 ms of prefill per step.
BudgetState fits(double rows, int mixed_steps = 0) {
  return BudgetState{2.0, {0, 10}, 10, rows, mixed_steps};
}
BudgetState refreshing() { return fits(5, StepBudget::kRefreshAfter); }

// A slice written as a short string: "d0" decode of sequence 0; "b1:64-69"
// a chunk of sequence 1 admitted by the budget; "f2:0-64" by the first-chunk
// rule.
// "d0+3": a decode of sequence 0 with 3 draft rows granted (speculation).
std::string describe(const PlannedSlice& s) {
  if (s.decode) return "d" + std::to_string(s.sequence) + (s.draft > 0 ? "+" + std::to_string(s.draft) : "");
  return (s.rule == ChunkRule::kFirstGridChunk ? "f" : "b") + std::to_string(s.sequence) + ":" +
         std::to_string(s.begin) + "-" + std::to_string(s.end);
}
std::vector<std::string> describe(const StepPlan& plan) {
  std::vector<std::string> out;
  for (const PlannedSlice& s : plan.slices) out.push_back(describe(s));
  return out;
}

struct Case {
  const char* name;
  std::vector<PlanSequence> running;
  int64_t batch_tokens;
  BudgetState budget;
  // Expected:
  std::vector<std::string> slices;
  BoundRule rule;
  int64_t bound, bound_left, overrun;
  bool refresh = false;
};

const Case kCases[] = {
    // Decode-only steps.
    {"three decodes, bound measured", {decode(), decode(), decode()}, 512, fits(5),
     {"d0", "d1", "d2"}, BoundRule::kMeasured, 5, 5, 0},
    {"decodes with the ratio off", {decode(), decode()}, 512, ratio_off(),
     {"d0", "d1"}, BoundRule::kUnbounded, 510, 510, 0},
    // A prompt alone: only the token budget counts.
    {"a prompt alone takes the token budget", {prompt(0, 1000)}, 512, fits(5),
     {"b0:0-512"}, BoundRule::kUnbounded, 512, 0, 0},
    {"a prompt alone, its end", {prompt(960, 1000)}, 512, fits(5),
     {"b0:960-1000"}, BoundRule::kUnbounded, 512, 472, 0},
    // A prompt beside decodes: the bound, chunks ending anywhere.
    {"past its first chunk, the bound's rows", {decode(), prompt(64, 1000)}, 512, fits(5),
     {"d0", "b1:64-69"}, BoundRule::kMeasured, 5, 0, 0},
    {"a chunk off the grid goes on off the grid", {decode(), prompt(69, 1000)}, 512, fits(5),
     {"d0", "b1:69-74"}, BoundRule::kMeasured, 5, 0, 0},
    {"unmeasured costs give one grid chunk", {decode(), prompt(64, 1000)}, 512, unmeasured(),
     {"d0", "b1:64-128"}, BoundRule::kUnmeasured, 64, 0, 0},
    // The first-chunk rule: whole to the next grid point, beyond the bound.
    {"first chunk from 0 beyond the bound", {decode(), prompt(0, 1000)}, 512, fits(5),
     {"d0", "f1:0-64"}, BoundRule::kMeasured, 5, 0, 59},
    {"first chunk from a restore point to the grid", {decode(), prompt(100, 1000, 100)}, 512, fits(5),
     {"d0", "f1:100-128"}, BoundRule::kMeasured, 5, 0, 23},
    {"first chunk from a grid restore point", {decode(), prompt(128, 1000, 128)}, 512, fits(5),
     {"d0", "f1:128-192"}, BoundRule::kMeasured, 5, 0, 59},
    {"a short prompt whole", {decode(), prompt(0, 20)}, 512, fits(5),
     {"d0", "f1:0-20"}, BoundRule::kMeasured, 5, 0, 15},
    {"a bound above the first chunk is the budget's", {decode(), prompt(0, 1000)}, 512, fits(100),
     {"d0", "b1:0-100"}, BoundRule::kMeasured, 100, 0, 0},
    {"a bound equal to the first chunk is the budget's", {decode(), prompt(0, 1000)}, 512, fits(64),
     {"d0", "b1:0-64"}, BoundRule::kMeasured, 64, 0, 0},
    // Several prompts arriving together each start with their first chunk.
    {"three prompts arrive together", {decode(), prompt(0, 300), prompt(0, 300), prompt(0, 300)}, 512, fits(5),
     {"d0", "f1:0-64", "f2:0-64", "f3:0-64"}, BoundRule::kMeasured, 5, 0, 187},
    {"after an overrun a running prompt gets nothing",
     {decode(), prompt(0, 300), prompt(64, 300)}, 512, fits(5),
     {"d0", "f1:0-64"}, BoundRule::kMeasured, 5, 0, 59},
    {"a running prompt takes the bound, a new one its first chunk",
     {decode(), prompt(64, 300), prompt(0, 300)}, 512, fits(5),
     {"d0", "b1:64-69", "f2:0-64"}, BoundRule::kMeasured, 5, 0, 64},
    {"the bound goes in admission order", {decode(), prompt(64, 100), prompt(64, 300)}, 512, fits(100),
     {"d0", "b1:64-100", "b2:64-128"}, BoundRule::kMeasured, 100, 0, 0},
    {"prompts together without decodes share the token budget",
     {prompt(0, 300), prompt(0, 300)}, 512, fits(5),
     {"b0:0-300", "b1:0-212"}, BoundRule::kUnbounded, 512, 0, 0},
    // batch_tokens caps everything, the first chunk included.
    {"the token budget cuts a prompt alone", {prompt(0, 1000), prompt(0, 1000)}, 100, fits(5),
     {"b0:0-100"}, BoundRule::kUnbounded, 100, 0, 0},
    {"the token budget cuts a first chunk", {decode(), decode(), decode(), decode(), prompt(0, 1000)}, 10,
     unmeasured(), {"d0", "d1", "d2", "d3", "f4:0-6"}, BoundRule::kUnmeasured, 6, 0, 0},
    {"the token budget cuts the second prompt's first chunk",
     {decode(), prompt(0, 300), prompt(0, 300)}, 100, fits(5),
     {"d0", "f1:0-64", "f2:0-35"}, BoundRule::kMeasured, 5, 0, 94},
    {"echo chunks are at most one grid chunk", {prompt(0, 1000, 0, true)}, 512, ratio_off(),
     {"b0:0-64"}, BoundRule::kUnbounded, 512, 448, 0},
    // Refresh steps: decodes only, whatever waits.
    {"a refresh step takes no prompt row", {decode(), prompt(64, 1000), prompt(0, 300)}, 512, refreshing(),
     {"d0"}, BoundRule::kRefresh, 0, 0, 0, true},
    {"without decodes there is no refresh", {prompt(64, 1000)}, 512, refreshing(),
     {"b0:64-576"}, BoundRule::kUnbounded, 512, 0, 0},
    {"the ratio off never refreshes", {decode(), prompt(64, 1000)}, 512, [] {
       BudgetState s = refreshing();
       s.itl_ratio = 0;
       return s;
     }(),
     {"d0", "b1:64-575"}, BoundRule::kUnbounded, 511, 0, 0},
    {"nothing to run", {}, 512, fits(5), {}, BoundRule::kUnbounded, 512, 512, 0},
    // Speculative rows (docs/batching.md, "The plan's rules"): after the decode rows, before prefill;
    // they count as decode rows.
    {"drafts beside decodes", {decode(4), decode(), decode(2)}, 512, fits(5),
     {"d0+4", "d1", "d2+2"}, BoundRule::kMeasured, 5, 5, 0},
    {"the token budget cuts drafts in input order", {decode(4), decode(4), decode(4)}, 10, ratio_off(),
     {"d0+4", "d1+3", "d2"}, BoundRule::kUnbounded, 0, 0, 0},
    {"drafts leave a waiting prompt a grid chunk", {decode(8), prompt(0, 1000)}, 70, unmeasured(),
     {"d0+5", "b1:0-64"}, BoundRule::kUnmeasured, 64, 0, 0},
    {"or what is left of its prompt", {decode(8), prompt(90, 100)}, 20, unmeasured(),
     {"d0+8", "b1:90-100"}, BoundRule::kUnmeasured, 11, 1, 0},
    {"drafts count as decode rows, the bound follows them", {decode(3), prompt(64, 1000)}, 512, ratio_off(),
     {"d0+3", "b1:64-572"}, BoundRule::kUnbounded, 508, 0, 0},
};

TEST(StepPlanPureTest, Table) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const StepPlan plan = plan_step(PlanInput{c.running, c.batch_tokens, c.budget});
    EXPECT_EQ(describe(plan), c.slices);
    EXPECT_EQ(plan.bound.rule, c.rule);
    EXPECT_EQ(plan.bound.rows, c.bound);
    EXPECT_EQ(plan.bound_left, c.bound_left);
    EXPECT_EQ(plan.bound_overrun, c.overrun);
    EXPECT_EQ(plan.refresh, c.refresh);
    int64_t decodes = 0, prefill = 0;
    for (const PlannedSlice& s : plan.slices) (s.decode ? decodes : prefill) += s.rows();
    EXPECT_EQ(plan.decode_rows, decodes);
    EXPECT_EQ(plan.prefill_rows, prefill);
  }
}

// Runs one prompt beside one decode step after step, as the loop does (the
// positions advance by what each step took), and lists its chunks.
std::vector<std::string> chunks_of(PlanSequence p, BudgetState budget, int64_t batch_tokens, int max_steps) {
  std::vector<std::string> out;
  for (int step = 0; step < max_steps && p.prefilling; ++step) {
    const StepPlan plan = plan_step(PlanInput{{decode(), p}, batch_tokens, budget});
    for (const PlannedSlice& s : plan.slices)
      if (!s.decode) {
        out.push_back(describe(s));
        p.position = s.end;
        p.prefilling = p.position < p.prompt_tokens;
      }
  }
  return out;
}

TEST(StepPlanPureTest, APromptBesideADecodeIsSpreadOverSteps) {
  EXPECT_EQ(chunks_of(prompt(0, 80), fits(5), 512, 100),
            (std::vector<std::string>{"f1:0-64", "b1:64-69", "b1:69-74", "b1:74-79", "b1:79-80"}));
  // From a restore point off the grid: the first chunk ends on the grid.
  EXPECT_EQ(chunks_of(prompt(100, 140, 100), fits(7), 512, 100),
            (std::vector<std::string>{"f1:100-128", "b1:128-135", "b1:135-140"}));
  // Ratio off: whole token-budget steps.
  EXPECT_EQ(chunks_of(prompt(0, 1200), ratio_off(), 512, 100),
            (std::vector<std::string>{"b1:0-511", "b1:511-1022", "b1:1022-1200"}));
}

TEST(StepPlanPureTest, FirstChunksEndOnTheGridTheBudgetsChunksAnywhere) {
  // The first chunk ends on the grid (or at the prompt's end) when the bound
  // is shorter; otherwise the bound decides and the chunk ends anywhere (the
  // PrefillCarry keeps the bits).
  for (int64_t start : {0, 1, 63, 64, 100, 127, 128})
    for (double bound : {1.0, 5.0, 63.0}) {
      const StepPlan plan = plan_step(PlanInput{{decode(), prompt(start, 1000, start)}, 512, fits(bound)});
      ASSERT_EQ(plan.slices.size(), 2u);
      const PlannedSlice& s = plan.slices[1];
      const int64_t to_grid = kGrid - start % kGrid;
      SCOPED_TRACE(describe(s));
      if (to_grid > bound) {
        EXPECT_EQ(s.rule, ChunkRule::kFirstGridChunk);
        EXPECT_EQ(s.end % kGrid, 0);
      } else {
        EXPECT_EQ(s.rule, ChunkRule::kBudget);
        EXPECT_EQ(s.rows(), static_cast<int64_t>(bound));
      }
    }
  // A prompt's end off the grid ends its last chunk, whichever rule.
  EXPECT_EQ(describe(plan_step(PlanInput{{decode(), prompt(0, 30)}, 512, fits(5)})),
            (std::vector<std::string>{"d0", "f1:0-30"}));
  EXPECT_EQ(describe(plan_step(PlanInput{{decode(), prompt(64, 67)}, 512, fits(5)})),
            (std::vector<std::string>{"d0", "b1:64-67"}));
}

// The pass split of Model::forward (step_plan.h, "The model's passes"): a
// step of at most 512 rows is one pass. With the default --batch-tokens no
// planned step is longer.
TEST(StepPlanPureTest, AtTheDefaultTokenBudgetNoStepIsReSplitByTheModel) {
  constexpr int64_t kModelPassRows = 512;  // Transformer::kMaxPassRows
  EXPECT_EQ(EngineOptions{}.batch_tokens, kModelPassRows);
  const StepPlan lone = plan_step(PlanInput{{prompt(0, 5000)}, EngineOptions{}.batch_tokens, ratio_off()});
  EXPECT_EQ(lone.rows(), kModelPassRows);
  std::vector<PlanSequence> many(8, prompt(0, 5000));
  many[0] = decode();
  EXPECT_LE(plan_step(PlanInput{many, EngineOptions{}.batch_tokens, fits(5)}).rows(), kModelPassRows);
  // Above it the model cuts the step into passes itself (grid-aligned, so
  // bit-exact); the plan is the step.
  EXPECT_EQ(plan_step(PlanInput{{prompt(0, 5000)}, 1024, ratio_off()}).rows(), 1024);
}

// The plan's rules (step_plan.h; docs/batching.md, "The plan's rules") over random inputs.
TEST(StepPlanPureTest, PromisesHoldOverRandomInputs) {
  std::mt19937 rng(35);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 5000; ++trial) {
    PlanInput in;
    const int n = static_cast<int>(pick(0, 8));
    for (int i = 0; i < n; ++i) {
      if (pick(0, 2) == 0) {
        in.running.push_back(decode(pick(0, 1) ? pick(0, 16) : 0));
        continue;
      }
      const int64_t len = pick(1, 2000), start = pick(0, len - 1);
      const int64_t at = pick(0, 1) ? start : pick(start, len - 1);
      in.running.push_back(prompt(at, len, start, pick(0, 5) == 0));
    }
    in.batch_tokens = pick(n + 1, 1024);
    const int kind = static_cast<int>(pick(0, 3));
    in.budget = kind == 0 ? ratio_off() : kind == 1 ? unmeasured() : fits(static_cast<double>(pick(1, 200)));
    if (kind >= 2 && pick(0, 3) == 0) in.budget.mixed_steps = StepBudget::kRefreshAfter;
    const StepPlan plan = plan_step(in);
    SCOPED_TRACE(trial);
    ASSERT_LE(plan.rows(), in.batch_tokens);
    ASSERT_GE(plan.bound_left, 0);
    ASSERT_GE(plan.bound.rows, 0);
    ASSERT_EQ(plan.refresh, plan.bound.rule == BoundRule::kRefresh);
    int64_t decodes = 0, draft_rows = 0, budget_rows = 0, first_rows = 0;
    bool prefill_seen = false;
    size_t last = 0;
    for (const PlannedSlice& s : plan.slices) {
      const PlanSequence& seq = in.running[s.sequence];
      if (s.decode) {
        ASSERT_FALSE(prefill_seen);  // decodes first
        ASSERT_FALSE(seq.prefilling);
        ASSERT_GE(s.draft, 0);
        ASSERT_LE(s.draft, seq.draft);
        ++decodes;
        draft_rows += s.draft;
        continue;
      }
      ASSERT_TRUE(!prefill_seen || s.sequence > last);  // admission order
      prefill_seen = true;
      last = s.sequence;
      ASSERT_FALSE(plan.refresh);
      ASSERT_EQ(s.begin, seq.position);
      ASSERT_GT(s.end, s.begin);
      ASSERT_LE(s.end, seq.prompt_tokens);
      if (seq.echo) {
        ASSERT_LE(s.rows(), kGrid);
      }
      if (s.rule == ChunkRule::kFirstGridChunk) {
        ASSERT_TRUE(seq.first_chunk_pending());
        ASSERT_TRUE(s.end % kGrid == 0 || s.end == seq.prompt_tokens || s.end - s.begin < kGrid - s.begin % kGrid);
        first_rows += s.rows();
      } else {
        ASSERT_LE(s.rows(), s.bound_left);
        budget_rows += s.rows();
      }
    }
    int64_t decoding = 0;
    for (const PlanSequence& s : in.running) decoding += !s.prefilling;
    ASSERT_EQ(decodes, decoding);  // every decode gets its row
    ASSERT_EQ(plan.draft_rows, draft_rows);
    ASSERT_EQ(plan.decode_rows, decodes + draft_rows);
    // Drafts never take the rows a waiting prompt's next chunk needs.
    int64_t keep = 0;
    for (const PlanSequence& s : in.running)
      if (s.prefilling) keep = std::max(keep, std::min(kGrid, s.prompt_tokens - s.position));
    ASSERT_LE(plan.decode_rows + (draft_rows > 0 ? keep : 0), std::max(in.batch_tokens, decodes + keep));
    ASSERT_LE(budget_rows, plan.bound.rows);
    ASSERT_EQ(plan.bound_left + budget_rows + first_rows - plan.bound_overrun, plan.bound.rows);
  }
}

// StepBudget's measures are the plan's input: prefill_bound() over a
// StepBudget's state() is what the loop gets, and the refresh is explicit.
TEST(StepPlanPureTest, TheBudgetsStateIsThePlansInput) {
  StepBudget b(2.0);
  EXPECT_EQ(prefill_bound(b.state(), 1, 511).rule, BoundRule::kUnmeasured);
  b.observe(1, 0, 10);   // a decode-only step: 10 ms
  b.observe(1, 10, 60);  // 50 ms for 10 prefill rows beside it
  PrefillBound bound = prefill_bound(b.state(), 1, 511);
  EXPECT_EQ(bound.rule, BoundRule::kMeasured);
  EXPECT_EQ(bound.rows, 2);  // (2 - 1) x 10 ms at 5 ms a row
  for (int i = 1; i < StepBudget::kRefreshAfter; ++i) b.observe(1, 2, 20);
  EXPECT_EQ(b.state().mixed_steps, StepBudget::kRefreshAfter);
  bound = prefill_bound(b.state(), 1, 511);
  EXPECT_EQ(bound.rule, BoundRule::kRefresh);
  EXPECT_EQ(bound.rows, 0);
  const StepPlan plan = plan_step(PlanInput{{decode(), prompt(0, 100)}, 512, b.state()});
  EXPECT_TRUE(plan.refresh);
  EXPECT_EQ(describe(plan), std::vector<std::string>{"d0"});
  b.observe(1, 0, 10);  // the refresh step ran
  EXPECT_EQ(prefill_bound(b.state(), 1, 511).rule, BoundRule::kMeasured);
}

}  // namespace
}  // namespace sb
