// Helpers for Bank tests over any tiers: publish a synthetic chain through
// a Bank, and plan a restore whose composed State must equal a cold
// synthetic prefill of the same prefix, bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <span>
#include <string>
#include <vector>

#include "bank/bank.h"
#include "bank/chain.h"
#include "bank/compose.h"
#include "bank/key.h"
#include "tests/bank/synthetic_state.h"
#include "tests/util/tokens.h"

namespace sb::testing {

constexpr uint32_t kB = 8;


// Publishes every full block of `tokens` and a snapshot at each position in
// `snapshot_blocks` (block counts), computed by one synthetic prefill.
inline void publish_chain(Bank& bank, const StateSchema& schema, const std::vector<int32_t>& tokens,
                   const std::set<int64_t>& snapshot_blocks, const std::string& ns = "") {
  const int64_t n_blocks = static_cast<int64_t>(tokens.size()) / kB;
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", ns, kB), tokens, kB, n_blocks);
  State state(schema);
  for (int64_t k = 0; k < n_blocks; ++k) {
    synthetic_prefill(state, std::span<const int32_t>(tokens).subspan(static_cast<size_t>(k) * kB, kB));
    ASSERT_TRUE(bank.publish(make_block(state, keys[k + 1], keys[k], k * kB,
                                        std::span<const int32_t>(tokens).subspan(static_cast<size_t>(k) * kB, kB)),
                             Retention::kBlock)
                    .is_ok());
    if (schema.has_recurrent() && snapshot_blocks.count(k + 1)) {
      ASSERT_TRUE(bank.publish(make_snapshot(capture_recurrent(state), keys[k + 1]), Retention::kKeep)
                      .is_ok());
    }
  }
}

struct Lookup {
  RestorePlan plan;
  State state;
};

// Plans a restore of `prompt` (keeping one token), composes it, and checks
// that the composed State equals a cold synthetic prefill of the same prefix.
inline Lookup lookup_and_verify(Bank& bank, const StateSchema& schema, const std::vector<int32_t>& prompt,
                         const std::string& ns = "") {
  const int64_t m = (static_cast<int64_t>(prompt.size()) - 1) / kB;
  const auto keys = chain_keys(root_key(kBankFormatVersion, "fp", ns, kB), prompt, kB, m);
  Lookup out;
  EXPECT_TRUE(bank.plan_restore(schema, keys, prompt, kB, &out.plan).is_ok());
  EXPECT_TRUE(compose_state(schema, out.plan.blocks, out.plan.snapshot, &out.state).is_ok());
  const State cold =
      synthetic_run(schema, std::span<const int32_t>(prompt).subspan(0, static_cast<size_t>(out.plan.restore_point)));
  EXPECT_TRUE(out.state.bitwise_equal(cold)) << "restored state differs from cold at " << out.plan.restore_point;
  EXPECT_LE(out.plan.restore_point, out.plan.common_prefix_tokens);
  return out;
}

}  // namespace sb::testing
