#include <algorithm>
#include <map>

#include "engine/engine.h"

namespace sb {

std::vector<SnapshotPlace> snapshot_positions(int64_t n, int64_t message_boundary, int64_t block_tokens,
                                              int64_t snapshot_every, int64_t branch_point) {
  std::map<int64_t, SnapshotReason> at;
  auto add = [&](int64_t p, SnapshotReason r) {
    if (p <= 0 || p > n) return;
    auto [it, fresh] = at.emplace(p, r);
    if (!fresh) it->second = std::max(it->second, r);
  };
  if (snapshot_every > 0)
    for (int64_t p = snapshot_every; p <= n; p += snapshot_every) add(p, SnapshotReason::kInterval);
  add(n / block_tokens * block_tokens, SnapshotReason::kPromptEnd);
  add((n - 1) / block_tokens * block_tokens, SnapshotReason::kPromptEnd);
  if (branch_point > 0) add(branch_point, SnapshotReason::kBranch);
  if (message_boundary >= 0) add(std::min(message_boundary, n) / block_tokens * block_tokens, SnapshotReason::kMessage);
  std::vector<SnapshotPlace> out;
  for (const auto& [p, r] : at) out.push_back({p, r});
  return out;
}

}  // namespace sb
