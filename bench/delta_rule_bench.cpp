// The gated delta rule alone, at the 0.8b qwen3_5 preset's shapes (16 value
// heads of 128 x 128 state): the chunked form over one 64-row chunk (prefill)
// and the recurrent form over one token (decode), min of N repetitions of wall
// time per call of one layer, and a decode step's recurrent form over all
// layers with states in memory. The hash of the outputs and states lets two
// builds show they give the same bits.
//
// usage: delta_rule_bench [--threads 2] [--reps 200] [--heads 16] [--dim 128] [--rows 64] [--layers 18]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "common/args.h"
#include "runtime/cpu/backend.h"
#include "runtime/kernels.h"
#include "runtime/threads.h"

using namespace sb;

namespace {

// FNV-1a over the bytes: equal only for equal bits.
uint64_t hash(const std::vector<float>& v, uint64_t h = 1469598103934665603ull) {
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Reads and writes 64 MiB, more than the caches of the machines this runs on
// hold, so that the next call finds its states in memory, as a step of the
// engine does (a layer's weights pass through the caches between two
// layers' delta rules).
void evict_caches() {
  static std::vector<float> junk(16 << 20, 1.0f);
  for (float& x : junk) x += 1.0f;
}

}  // namespace

int main(int argc, char** argv) {
  Args args({"threads", "reps", "heads", "dim", "rows", "layers"}, {});
  Status s = args.parse(argc, argv);
  int64_t threads = 2, reps = 200, heads = 16, dim = 128, rows = 64, layers = 18;
  if (s) s = args.get_int("threads", 2, 1, 256, &threads);
  if (s) s = args.get_int("reps", 200, 1, 100000, &reps);
  if (s) s = args.get_int("heads", 16, 1, 256, &heads);
  if (s) s = args.get_int("dim", 128, 16, 1024, &dim);
  if (s) s = args.get_int("rows", 64, 1, kDeltaChunkRows, &rows);
  if (s) s = args.get_int("layers", 18, 1, 128, &layers);
  if (!s || !args.positional().empty()) {
    std::fprintf(stderr,
                 "usage: delta_rule_bench [--threads 2] [--reps 200] [--heads 16] [--dim 128] [--rows 64] "
                 "[--layers 18]%s%s\n",
                 s ? "" : ": ", s ? "" : s.message().c_str());
    return 2;
  }
  ThreadPool pool(static_cast<int>(threads));
  auto kernels = make_cpu_kernels(&pool);

  // Inputs shaped as the model gives them: unit-norm q and k rows, gates of
  // a few tenths, beta in (0, 1).
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  std::vector<float> q(rows * heads * dim), k(q.size()), v(q.size()), g(rows * heads), beta(rows * heads);
  for (auto* x : {&q, &k, &v})
    for (auto& f : *x) f = nd(rng);
  for (auto* x : {&q, &k})
    for (int64_t r = 0; r < rows * heads; ++r) {
      double s = 0;
      for (int64_t a = 0; a < dim; ++a) s += double(x->at(r * dim + a)) * x->at(r * dim + a);
      for (int64_t a = 0; a < dim; ++a) x->at(r * dim + a) = static_cast<float>(x->at(r * dim + a) / std::sqrt(s));
    }
  for (auto& f : g) f = -0.5f * ud(rng);
  for (auto& f : beta) f = ud(rng);
  std::vector<float> state0(heads * dim * dim);
  for (auto& f : state0) f = 0.1f * nd(rng);

  DeltaRuleInput in;
  in.n_k = heads, in.n_v = heads, in.d_k = dim, in.d_v = dim;
  in.q = q.data(), in.k = k.data(), in.v = v.data(), in.g = g.data(), in.beta = beta.data();
  std::printf("threads %lld, %lld heads of %lld x %lld, min of %lld calls, ms per call\n", static_cast<long long>(threads),
              static_cast<long long>(heads), static_cast<long long>(dim), static_cast<long long>(dim),
              static_cast<long long>(reps));
  std::printf("| form | rows | ms | hash of outputs and state |\n|---|---|---|---|\n");
  for (bool chunked : {true, false}) {
    in.tokens = chunked ? rows : 1;
    std::vector<float> state = state0, out(in.tokens * heads * dim);
    float* const states[] = {state.data()};
    auto call = [&] {
      if (chunked)
        kernels->delta_rule_chunk(in, state.data(), out.data());
      else
        kernels->delta_rule_recurrent(in, states, out.data());
    };
    call();
    const uint64_t h = hash(state, hash(out));
    double best = 1e30;
    for (int64_t r = 0; r < reps; ++r) {
      state = state0;
      const auto t0 = std::chrono::steady_clock::now();
      call();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("| %s | %lld | %.3f | %016llx |\n", chunked ? "chunk" : "recurrent", static_cast<long long>(in.tokens),
                best * 1e3, static_cast<unsigned long long>(h));
  }
  // A decode step's recurrent form as the engine runs it: one call per
  // layer, one row for each of the step's sequences, on states that live
  // in memory rather than in cache (layers x sequences of them).
  std::printf("\n| decode step: sequences | layers | ms per step (states from memory) |\n|---|---|---|\n");
  for (int64_t seqs : {1, 8}) {
    std::vector<float> states(layers * seqs * state0.size());
    for (int64_t i = 0; i < layers * seqs; ++i) std::copy(state0.begin(), state0.end(), states.begin() + i * state0.size());
    std::vector<float> out(seqs * heads * dim);
    DeltaRuleInput step = in;
    step.tokens = seqs;
    std::vector<float> qs(seqs * heads * dim), ks(qs.size()), vs(qs.size()), gs(seqs * heads), bs(seqs * heads);
    for (int64_t t = 0; t < seqs; ++t) {
      std::copy(q.begin(), q.begin() + heads * dim, qs.begin() + t * heads * dim);
      std::copy(k.begin(), k.begin() + heads * dim, ks.begin() + t * heads * dim);
      std::copy(v.begin(), v.begin() + heads * dim, vs.begin() + t * heads * dim);
      std::copy(g.begin(), g.begin() + heads, gs.begin() + t * heads);
      std::copy(beta.begin(), beta.begin() + heads, bs.begin() + t * heads);
    }
    step.q = qs.data(), step.k = ks.data(), step.v = vs.data(), step.g = gs.data(), step.beta = bs.data();
    double best = 1e30;
    for (int64_t r = 0; r < std::max<int64_t>(3, reps / 20); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t l = 0; l < layers; ++l) {
        std::vector<float*> ptrs;
        for (int64_t t = 0; t < seqs; ++t) ptrs.push_back(states.data() + (l * seqs + t) * state0.size());
        kernels->delta_rule_recurrent(step, ptrs.data(), out.data());
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("| %lld | %lld | %.2f |\n", static_cast<long long>(seqs), static_cast<long long>(layers), best * 1e3);
  }
  // A verify step of one sequence: each layer's rows in one call, in place
  // in the sequence's state (a verify step without a rollback), from the
  // state kept for a rollback into the sequence's state (as the engine runs
  // a speculative verify: model/model.h, VerifyRollback), or with the state
  // after each row but the last written to a buffer of its own (kept: what
  // the engine did before). The first two give the same hash.
  std::printf("\n| verify step: rows | row states | layers | ms per step (states from memory) | hash of outputs and states |\n"
              "|---|---|---|---|---|\n");
  enum class Form { kInPlace, kFromKept, kEachRow };
  const int64_t five = std::min<int64_t>(5, rows);
  for (const auto& [n, form] : {std::pair<int64_t, Form>{1, Form::kInPlace}, {five, Form::kInPlace},
                                {five, Form::kFromKept}, {five, Form::kEachRow}}) {
    const size_t S = state0.size();
    const bool keep = form == Form::kEachRow;
    std::vector<float> states(layers * n * S), out(n * heads * dim), kept;
    if (form == Form::kFromKept)
      for (int64_t l = 0; l < layers; ++l) kept.insert(kept.end(), state0.begin(), state0.end());
    for (int64_t i = 0; i < layers * n; ++i) std::copy(state0.begin(), state0.end(), states.begin() + i * S);
    std::vector<float> qs(n * heads * dim), ks(qs.size()), vs(qs.size()), gs(n * heads), bs(n * heads);
    for (int64_t t = 0; t < n; ++t) {
      std::copy(q.begin() + t * heads * dim, q.begin() + (t + 1) * heads * dim, qs.begin() + t * heads * dim);
      std::copy(k.begin() + t * heads * dim, k.begin() + (t + 1) * heads * dim, ks.begin() + t * heads * dim);
      std::copy(v.begin() + t * heads * dim, v.begin() + (t + 1) * heads * dim, vs.begin() + t * heads * dim);
      std::copy(g.begin() + t * heads, g.begin() + (t + 1) * heads, gs.begin() + t * heads);
      std::copy(beta.begin() + t * heads, beta.begin() + (t + 1) * heads, bs.begin() + t * heads);
    }
    DeltaRuleInput step = in;
    step.tokens = n;
    step.q = qs.data(), step.k = ks.data(), step.v = vs.data(), step.g = gs.data(), step.beta = bs.data();
    double best = 1e30;
    uint64_t h = 0;
    for (int64_t r = 0; r < std::max<int64_t>(3, reps / 20); ++r) {
      // Every rep from the same start states, so the hash is the same whatever the reps
      // (from the kept state, the rows write the whole state without reading it).
      if (form != Form::kFromKept)
        for (int64_t l = 0; l < layers; ++l)
          std::copy(state0.begin(), state0.end(), states.begin() + (l * n + n - 1) * S);
      evict_caches();
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t l = 0; l < layers; ++l) {
        std::vector<float*> ptrs;
        for (int64_t t = 0; t < n; ++t) ptrs.push_back(states.data() + (l * n + (keep ? t : n - 1)) * S);
        const float* from = form == Form::kFromKept ? kept.data() + l * S : ptrs.back();
        kernels->delta_rule_rows(step, from, ptrs.data(), out.data());
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      h = hash(states, hash(out));
    }
    const char* name = form == Form::kInPlace ? "in place" : form == Form::kFromKept ? "from the kept state" : "kept";
    std::printf("| %lld | %s | %lld | %.2f | %016llx |\n", static_cast<long long>(n), name,
                static_cast<long long>(layers), best * 1e3, static_cast<unsigned long long>(h));
  }
  return 0;
}
