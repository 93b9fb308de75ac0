// The cost of one batched forward step by its shape: d decode rows (each its
// own sequence) plus p prefill rows of one more sequence, on one runtime
// thread, in CPU time (min of --reps), so it reads the same on a loaded
// machine; with --threads N above 1, in wall time (min of --reps). Shows how
// much a decode row costs once the weights are read for the step anyway,
// which is what continuous batching gains, and what a prefill chunk adds to
// a step of running decodes (sizing --batch-tokens).
//
// usage: batch_step_bench MODEL_DIR [--reps 3] [--history 64] [--threads 1] [--shape DECODES,PREFILL[,N]]
//                         [--verify ROWS]
// --shape measures that one shape only (e.g. under perf record); N
// sequences (default 1, at most 8) prefill PREFILL rows each, as when
// several prompts arrive together. --verify ROWS measures a speculative
// verify step instead: ROWS decode rows of one sequence (its token and a
// draft of ROWS - 1), every row's logits, what a rollback needs kept
// (model/model.h, VerifyRollback), as the engine runs it; then the rollback
// to each shorter prefix of its rows.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/memory_tuning.h"
#include "model/model.h"
#include "runtime/cpu/backend.h"

namespace {

double thread_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  // The engine's malloc settings: without them a step's fresh logits
  // vectors are page faults here that the server never pays.
  sb::tune_memory(argv);
  sb::Args args({"reps", "history", "threads", "shape", "verify"}, {});
  sb::Status s = args.parse(argc, argv);
  int64_t reps = 3, history = 64, threads = 1;
  if (s) s = args.get_int("reps", 3, 1, 1000, &reps);
  if (s) s = args.get_int("threads", 1, 1, 256, &threads);
  if (s) s = args.get_int("history", 64, 1, 1 << 20, &history);
  int shape_decodes = -1, shape_prefill = 0, shape_prefills = 1;
  int64_t verify = 0;
  if (s && args.has("verify")) s = args.get_int("verify", 0, 1, 9, &verify);
  if (s && args.has("shape")) {
    const int n = std::sscanf(args.get("shape").c_str(), "%d,%d,%d", &shape_decodes, &shape_prefill, &shape_prefills);
    if (n < 2 || shape_decodes < 0 || shape_decodes > 8 || shape_prefill < 0 || shape_prefill > 512 ||
        shape_decodes + shape_prefill == 0 || shape_prefills < 1 || shape_prefills > 8 ||
        shape_prefill * shape_prefills > 512)
      s = sb::Status::invalid(
          "--shape takes DECODES,PREFILL[,N] (0..8 decodes, N of 1..8 prompts of PREFILL rows, at most 512 in all, "
          "not all 0)");
  }
  if (!s || args.positional().size() != 1) {
    std::fprintf(stderr,
                 "usage: batch_step_bench MODEL_DIR [--reps 3] [--history 64] [--threads 1] [--shape D,P[,N]] "
                 "[--verify ROWS]%s%s\n",
                 s ? "" : ": ", s ? "" : s.message().c_str());
    return 2;
  }
  std::unique_ptr<sb::Model> model;
  sb::RuntimeOptions ro;
  ro.threads = static_cast<int>(threads);
  double (*now_ms)() = threads == 1 ? thread_cpu_ms : wall_ms;
  if (!(s = sb::Model::load(args.positional()[0], ro, sb::cpu_kernels_factory(), &model))) {
    std::fprintf(stderr, "batch_step_bench: %s\n", s.to_string().c_str());
    return 2;
  }
  std::mt19937 rng(1);
  auto tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % 100000);
    return t;
  };
  // Sequences with a history, copied fresh for every measured step.
  std::vector<sb::State> base;
  for (int i = 0; i < 8 + (shape_decodes >= 0 ? shape_prefills : 1); ++i) {
    base.push_back(model->new_state());
    sb::PrefillOutput out;
    if (!(s = model->prefill(base.back(), tokens(history), {}, &out))) {
      std::fprintf(stderr, "batch_step_bench: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  const std::vector<int32_t> next = tokens(9), chunk = tokens(512);
  // The min of the reps; *median, when given, gets their median (what the
  // engine's steps see on a busy machine).
  // What the verify step keeps for a rollback, kept across reps as a sequence keeps it.
  sb::VerifyRollback rollback;
  auto step_ms = [&](int decodes, int64_t prefill, int prefills = 1, double* median = nullptr) {
    std::vector<double> times;
    // Assigned, not constructed, each rep: the copies reuse their storage, so
    // page faults of fresh memory stay out of a profile of the steps.
    std::vector<sb::State> states(base.begin(), base.begin() + decodes + prefills);
    // Each step's outputs are freed after the next step has made its own, as
    // the engine's sequences keep their logits until their next token. Freed
    // before it, the 8 MB of an 8-row step's logits went back to the kernel
    // each time (glibc trims its heap) and came back as page faults, 25 ms of
    // a 50 ms step on a virtual machine, which the engine never pays.
    std::vector<sb::SequenceOutput> kept;
    for (int64_t r = 0; r < reps; ++r) {
      std::copy(base.begin(), base.begin() + decodes + prefills, states.begin());
      std::vector<sb::SequenceStep> batch;
      if (verify > 0) {
        sb::SequenceStep st;
        st.state = &states[0];
        st.tokens = std::span<const int32_t>(next).first(static_cast<size_t>(verify));
        st.decode = true;
        st.logits = sb::LogitRows::kAll;
        if (verify > 1) st.rollback = &rollback;
        batch.push_back(st);
      }
      for (int d = 0; d < decodes; ++d) {
        sb::SequenceStep st;
        st.state = &states[static_cast<size_t>(d)];
        st.tokens = std::span<const int32_t>(&next[static_cast<size_t>(d)], 1);
        st.decode = true;
        batch.push_back(st);
      }
      for (int q = 0; prefill > 0 && q < prefills; ++q) {
        sb::SequenceStep st;
        st.state = &states[static_cast<size_t>(decodes + q)];
        st.tokens = std::span<const int32_t>(chunk).subspan(static_cast<size_t>(q * prefill),
                                                            static_cast<size_t>(prefill));
        st.logits = sb::LogitRows::kNone;
        batch.push_back(st);
      }
      std::vector<sb::SequenceOutput> out;
      const double t0 = now_ms();
      if (!model->forward(batch, &out)) std::abort();
      times.push_back(now_ms() - t0);
      kept.swap(out);
    }
    std::sort(times.begin(), times.end());
    if (median) *median = times[times.size() / 2];
    return times.front();
  };
  std::printf("one forward step, %lld thread%s, %s ms (min of %lld); history %lld tokens per sequence\n",
              static_cast<long long>(threads), threads == 1 ? "" : "s", threads == 1 ? "CPU" : "wall",
              static_cast<long long>(reps), static_cast<long long>(history));
  if (verify > 0) {
    double median = 0;
    const double best = step_ms(0, 0, 1, &median);
    std::printf("a verify step of %lld rows: %.1f ms (median %.1f)\n", static_cast<long long>(verify), best, median);
    // What a rejection then costs: the rollback to the first n rows (the
    // Gated DeltaNet layers' first n rows replayed), from the State the last rep
    // of the step left, which `rollback` describes.
    sb::State after = base[0];
    {
      sb::SequenceStep st;
      st.state = &after;
      st.tokens = std::span<const int32_t>(next).first(static_cast<size_t>(verify));
      st.decode = true;
      st.logits = sb::LogitRows::kAll;
      st.rollback = &rollback;
      std::vector<sb::SequenceOutput> out;
      if (verify < 2 || !model->forward(std::span<const sb::SequenceStep>(&st, 1), &out)) return 0;
    }
    sb::State back = after;
    sb::VerifyRollback once = rollback;
    for (int64_t n = 1; n < verify; ++n) {
      std::vector<double> times;
      for (int64_t r = 0; r < reps; ++r) {
        back = after;
        once = rollback;  // a rollback uses up what it reads
        const double t0 = now_ms();
        if (!model->roll_back(back, once, n)) std::abort();
        times.push_back(now_ms() - t0);
      }
      std::sort(times.begin(), times.end());
      std::printf("  rolled back to its first %lld rows: %.2f ms (median %.2f)\n", static_cast<long long>(n),
                  times.front(), times[times.size() / 2]);
    }
    return 0;
  }
  if (shape_decodes >= 0) {
    double median = 0;
    const double best = step_ms(shape_decodes, shape_prefill, shape_prefills, &median);
    std::printf("%d decodes, %d prefill rows%s: %.1f ms (median %.1f)\n", shape_decodes, shape_prefill,
                shape_prefills > 1 ? (" in each of " + std::to_string(shape_prefills) + " sequences").c_str() : "",
                best, median);
    return 0;
  }
  std::printf("%8s %8s %10s %14s\n", "decodes", "prefill", "step ms", "ms per row");
  const double one = step_ms(1, 0);
  std::printf("%8d %8d %10.1f %14.1f\n", 1, 0, one, one);
  for (int d : {2, 4, 8}) {
    const double ms = step_ms(d, 0);
    std::printf("%8d %8d %10.1f %14.1f   (%.2fx the tokens/s of one)\n", d, 0, ms, ms / d, d * one / ms);
  }
  for (int64_t p : {16, 32, 64, 128, 256, 504}) {
    const double ms = step_ms(p == 504 ? 8 : 7, p);
    std::printf("%8d %8lld %10.1f %14.1f\n", p == 504 ? 8 : 7, static_cast<long long>(p), ms,
                ms / static_cast<double>(p + (p == 504 ? 8 : 7)));
  }
  return 0;
}
