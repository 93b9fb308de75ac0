// Causal softmax attention over the cached keys, one pass with a running
// softmax over key blocks of kBlock keys at absolute positions [kBlock b,
// kBlock (b + 1)).
//
// Why the bits do not depend on the call: for a (query row, head) the
// sequence of operations is fixed by that row's position and mask alone. It
// visits the blocks holding a visible key in ascending order; within a block
// its scores are simd.h dot products, its
// running max, rescale and sum of exponentials take the visible keys in
// ascending order, and its output accumulates p * v over exactly those keys,
// in ascending order, one fused multiply-add chain per dim. Which rows share
// a tile, how many rows a call has, which sequences share the call and which
// thread runs the tile only decide what runs side by side. A tile (kRows rows
// of one KV head's query group) reads each key block once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/cpu/bf16.h"
#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/simd.h"
#include "runtime/cpu/small_gemm.h"
#include "runtime/math.h"

namespace sb::cpu {
namespace {

constexpr int64_t kBlock = 64;
constexpr int64_t kRows = 16;

struct AttentionScratch {
  std::vector<float> q, s, o, m, l, kb, vb;
  void resize(int64_t nq, int64_t d) {
    q.resize(nq * d);
    kb.resize(kBlock * d);
    vb.resize(kBlock * d);
    s.resize(nq * kBlock);
    o.resize(nq * d);
    m.resize(nq);
    l.resize(nq);
  }
};

// n rows of d bf16 values, `ld` apart, to contiguous f32 rows.
void widen_rows(const uint16_t* src, int64_t n, int64_t d, int64_t ld, float* out) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < d; ++i) out[r * d + i] = bf16_value(src[r * ld + i]);
}

int64_t row_tiles(const AttentionInput& in) { return (in.rows + kRows - 1) / kRows; }

// Tile `task` of one sequence's call: KV head task / row_tiles, rows from
// kRows (task % row_tiles).
void attention_tile(const AttentionInput& in, int64_t task, float* out) {
  const int64_t d = in.head_dim, group = in.n_heads / in.n_kv, ld_kv = in.n_kv * d;
  const int64_t tiles = row_tiles(in);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t g = task / tiles;
  const int64_t r0 = (task % tiles) * kRows, r1 = std::min(in.rows, r0 + kRows);
  const int64_t nq = (r1 - r0) * group;  // query vectors: (row, head in group), row-major
  thread_local AttentionScratch sc;
  sc.resize(nq, d);
  for (int64_t r = r0; r < r1; ++r)
    std::copy_n(in.q + (r * in.n_heads + g * group) * d, group * d, sc.q.data() + (r - r0) * group * d);
  std::fill(sc.o.begin(), sc.o.begin() + nq * d, 0.0f);
  std::fill(sc.m.begin(), sc.m.begin() + nq, neg_inf);
  std::fill(sc.l.begin(), sc.l.begin() + nq, 0.0f);
  auto visible = [&](int64_t r, int64_t tau) {
    return tau <= in.first_pos + r &&
           (!in.block_mask || in.block_mask[r * in.mask_stride + tau / in.mask_block] != 0);
  };
  const int64_t n_keys = in.first_pos + r1;  // keys the tile's last row sees
  for (int64_t k0 = 0; k0 < n_keys; k0 += kBlock) {
    const int64_t kn = std::min(kBlock, n_keys - k0);
    // The block's keys and values of this KV head as f32 rows (bf16 widens
    // exactly, so the bits are those of f32 storage holding the same values).
    const float *kblock, *vblock;
    int64_t ld = ld_kv;
    if (in.kv_dtype == DType::kF32) {
      kblock = static_cast<const float*>(in.k) + k0 * ld_kv + g * d;
      vblock = static_cast<const float*>(in.v) + k0 * ld_kv + g * d;
    } else {
      widen_rows(static_cast<const uint16_t*>(in.k) + k0 * ld_kv + g * d, kn, d, ld_kv, sc.kb.data());
      widen_rows(static_cast<const uint16_t*>(in.v) + k0 * ld_kv + g * d, kn, d, ld_kv, sc.vb.data());
      kblock = sc.kb.data();
      vblock = sc.vb.data();
      ld = d;
    }
    // Scores of the whole tile against the block.
    small_dots(nq, kn, d, sc.q.data(), d, kblock, ld, sc.s.data(), kBlock);
    // Every row of the tile sees every key of the block: one product for
    // the tile (each element's chain is the one a row alone would run).
    const bool whole = !in.block_mask && k0 + kn - 1 <= in.first_pos + r0;
    int64_t runs[kBlock][2];
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t last = std::min(kn, in.first_pos + r + 1 - k0);  // keys [k0, k0 + last) are causal
      if (last <= 0) continue;
      const int64_t q0 = (r - r0) * group;
      // Runs of visible keys in this block, the same for every head of the group.
      int64_t n_runs = 0;
      for (int64_t j = 0; j < last;) {
        if (!visible(r, k0 + j)) {
          ++j;
          continue;
        }
        int64_t e = j + 1;
        while (e < last && visible(r, k0 + e)) ++e;
        runs[n_runs][0] = j;
        runs[n_runs][1] = e;
        ++n_runs;
        j = e;
      }
      if (n_runs == 0) continue;
      for (int64_t h = 0; h < group; ++h) {
        const int64_t qi = q0 + h;
        float* s = sc.s.data() + qi * kBlock;
        float mx = sc.m[qi];
        for (int64_t u = 0; u < n_runs; ++u)
          for (int64_t j = runs[u][0]; j < runs[u][1]; ++j) {
            s[j] *= in.scale;
            mx = std::max(mx, s[j]);
          }
        const float rescale = exp_f(sc.m[qi] - mx);
        float sum = sc.l[qi] * rescale;
        // e^(s - mx) by vexp over whole vectors, exp_f (the same bits) for
        // the rest; the sum in ascending key order.
        for (int64_t u = 0; u < n_runs; ++u) {
          int64_t j = runs[u][0];
          for (; j + 16 <= runs[u][1]; j += 16) vexp(V16::load(s + j) - V16::set1(mx)).store(s + j);
          for (; j < runs[u][1]; ++j) s[j] = exp_f(s[j] - mx);
          for (j = runs[u][0]; j < runs[u][1]; ++j) sum += s[j];
        }
        sc.m[qi] = mx;
        sc.l[qi] = sum;
        float* o = sc.o.data() + qi * d;
        if (rescale != 1.0f)
          for (int64_t c = 0; c < d; ++c) o[c] *= rescale;
      }
      if (whole) continue;
      // O += P V over each run, for the group's heads together.
      for (int64_t u = 0; u < n_runs; ++u) {
        const int64_t j0 = runs[u][0], len = runs[u][1] - j0;
        small_gemm(group, d, len, sc.s.data() + q0 * kBlock + j0, kBlock, vblock + j0 * ld, ld, sc.o.data() + q0 * d,
                   d, true);
      }
    }
    if (whole) small_gemm(nq, d, kn, sc.s.data(), kBlock, vblock, ld, sc.o.data(), d, true);
  }
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t h = 0; h < group; ++h) {
      const int64_t qi = (r - r0) * group + h;
      const float inv = 1.0f / sc.l[qi];
      const float* o = sc.o.data() + qi * d;
      float* dst = out + (r * in.n_heads + g * group + h) * d;
      for (int64_t c = 0; c < d; ++c) dst[c] = o[c] * inv;
    }
}

}  // namespace

void CpuKernels::attention(std::span<const AttentionInput> calls, float* const* outs) {
  FlushSubnormals mode;
  // first[i]: the first task of call i; one pool job for all of them, so a
  // decode step of many sequences hands work to the threads once per layer.
  std::vector<int64_t> first(calls.size() + 1, 0);
  for (size_t i = 0; i < calls.size(); ++i) first[i + 1] = first[i] + calls[i].n_kv * row_tiles(calls[i]);
  pool_->parallel_for(first.back(), [&](int64_t task) {
    const size_t i = std::upper_bound(first.begin(), first.end(), task) - first.begin() - 1;
    attention_tile(calls[i], task - first[i], outs[i]);
  });
}

}  // namespace sb::cpu
