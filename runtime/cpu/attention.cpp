// Causal softmax attention over the cached keys. For each (query row, head)
// the scores, the softmax and the weighted sum of values run in key order with
// the fixed reductions of simd.h, whatever rows share the call. Query rows are
// tiled only so that a key row read from memory serves many queries.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/cpu/cpu_kernels.h"
#include "runtime/cpu/float_mode.h"
#include "runtime/cpu/simd.h"

namespace sb::cpu {

void CpuKernels::attention(const AttentionInput& in, float* out) {
  FlushSubnormals mode;
  const int64_t d = in.head_dim, group = in.n_heads / in.n_kv;
  constexpr int64_t kRowTile = 16;
  const int64_t row_tiles = (in.rows + kRowTile - 1) / kRowTile;
  pool_->parallel_for(in.n_kv * row_tiles, [&](int64_t task) {
    const int64_t g = task / row_tiles;
    const int64_t r0 = (task % row_tiles) * kRowTile, r1 = std::min(in.rows, r0 + kRowTile);
    const int64_t n_keys = in.first_pos + r1;  // keys any row of the tile may see
    const int64_t queries = (r1 - r0) * group;
    std::vector<float> scores(queries * n_keys);
    auto visible = [&](int64_t r, int64_t tau) {
      if (tau > in.first_pos + r) return false;
      return !in.block_mask || in.block_mask[r * in.mask_stride + tau / in.mask_block] != 0;
    };
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (int64_t tau = 0; tau < n_keys; ++tau) {
      const float* kt = in.k + (tau * in.n_kv + g) * d;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t h = 0; h < group; ++h) {
          const int64_t qi = (r - r0) * group + h;
          const float* q = in.q + (r * in.n_heads + g * group + h) * d;
          scores[qi * n_keys + tau] = visible(r, tau) ? dot(q, kt, d) * in.scale : neg_inf;
        }
    }
    for (int64_t qi = 0; qi < queries; ++qi) {
      float* s = scores.data() + qi * n_keys;
      float mx = neg_inf;
      for (int64_t tau = 0; tau < n_keys; ++tau) mx = std::max(mx, s[tau]);
      float sum = 0.0f;
      for (int64_t tau = 0; tau < n_keys; ++tau) {
        s[tau] = s[tau] == neg_inf ? 0.0f : std::exp(s[tau] - mx);
        sum += s[tau];
      }
      const float inv = 1.0f / sum;
      for (int64_t tau = 0; tau < n_keys; ++tau) s[tau] *= inv;
    }
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t h = 0; h < group; ++h) std::fill_n(out + (r * in.n_heads + g * group + h) * d, d, 0.0f);
    for (int64_t tau = 0; tau < n_keys; ++tau) {
      const float* vt = in.v + (tau * in.n_kv + g) * d;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t h = 0; h < group; ++h) {
          const int64_t qi = (r - r0) * group + h;
          const float p = scores[qi * n_keys + tau];
          if (p != 0.0f) axpy(p, vt, out + (r * in.n_heads + g * group + h) * d, d);
        }
    }
  });
}

}  // namespace sb::cpu
