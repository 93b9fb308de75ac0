// The HTTP layer's small parts: stop strings, namespaces, float printing,
// the Prometheus text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "server/protocols/namespace.h"
#include "server/operator/metrics.h"
#include "server/protocols/generation.h"
#include "server/protocols/stop_matcher.h"
#include "server/server.h"
#include "server/transport/sse.h"

namespace sb {
namespace {

// Issue 34: loopback is decided by the resolved addresses, never by the
// spelling of the name.
TEST(HostIsLoopback, DecidedByEveryResolvedAddress) {
  EXPECT_TRUE(host_is_loopback("127.0.0.1"));
  EXPECT_TRUE(host_is_loopback("127.1.2.3"));
  EXPECT_TRUE(host_is_loopback("::1"));
  EXPECT_TRUE(host_is_loopback("localhost"));
  EXPECT_FALSE(host_is_loopback("127.0.0.1.example.invalid"));  // resolves to nothing
  EXPECT_FALSE(host_is_loopback("127.evil.invalid"));
  EXPECT_FALSE(host_is_loopback("0.0.0.0"));
  EXPECT_FALSE(host_is_loopback("::"));
  EXPECT_FALSE(host_is_loopback("10.0.0.1"));
  EXPECT_FALSE(host_is_loopback(""));
}

TEST(StopMatcher, HoldsBackPossibleStartsAndCutsAtTheFirstStop) {
  StopMatcher m({"END", "\n\n"});
  EXPECT_EQ(m.push("hello E"), "hello ");  // "E" may start "END"
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("X more\n"), "ENX more");
  EXPECT_EQ(m.push("\nafter"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("ignored"), "");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcher, ConcatenationEqualsTextBeforeTheStopForEverySplit) {
  const std::string text = "abc<stop>def";
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); ++b) {
      StopMatcher m({"<stop>", "zz"});
      std::string out = m.push(text.substr(0, a));
      out += m.push(text.substr(a, b - a));
      out += m.push(text.substr(b));
      out += m.finish();
      EXPECT_EQ(out, "abc") << a << "," << b;
    }
  }
  StopMatcher none({"<stop>"});
  std::string held = none.push("abc<st");
  EXPECT_EQ(held, "abc");
  EXPECT_EQ(held + none.finish(), "abc<st");
}

TEST(RoundTripFloat, NineDigitsReadBackAsTheSameFloat) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  while (checked < 200000) {
    uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, 4);
    if (!std::isfinite(f)) continue;
    ++checked;
    ResponseJson j = f;
    std::string text = dump_json(j);
    // What a client does: parse the decimal, narrow to float.
    float back = static_cast<float>(std::strtod(text.c_str(), nullptr));
    uint32_t back_bits;
    std::memcpy(&back_bits, &back, 4);
    ASSERT_EQ(back_bits, b) << text;
    // At most 9 significant digits are printed (from the first non-zero
    // digit to the last; zeros that only place the point do not count).
    std::string mantissa = text.substr(0, text.find_first_of("eE"));
    std::string d;
    for (char c : mantissa)
      if (c >= '0' && c <= '9') d += c;
    size_t first = d.find_first_not_of('0'), last = d.find_last_not_of('0');
    int digits = first == std::string::npos ? 0 : static_cast<int>(last - first + 1);
    ASSERT_LE(digits, 9) << text;
  }
}

TEST(Metrics, PrometheusTextHasEveryFamilyWithCounts) {
  Metrics m;
  m.record_request("/v1/completions", 200);
  m.record_request("/v1/completions", 200);
  m.record_request("/v1/completions", 400);
  RestoreRecord r;
  r.mode = RestoreMode::from(TierKind::kSsd);
  r.restore_point = 512;
  r.bytes_read = 5'000'000;
  r.lookup_ms = 2;
  r.restore_ms = 5;
  r.miss_reason = MissReason::kDiverged;  // a partial hit
  r.diverged_at = 530;
  m.record_completion(r, 600, 10, 30.0);
  r = RestoreRecord();
  r.mode = RestoreMode::cold();
  r.miss_reason = MissReason::kNoEntry;
  r.stored_in_other_namespace = true;  // counted as the operator sees it
  m.record_completion(r, 100, 5, 3000.0);
  r.stored_in_other_namespace = false;
  m.record_completion(r, 100, 5, 3000.0);
  r = RestoreRecord();
  r.mode = RestoreMode::from(TierKind::kRam);
  r.restore_point = 64;
  r.bytes_read = 1000;
  m.record_completion(r, 65, 1, 10.0);  // a full hit
  BankStatsView bank;
  BankTierStats ram;
  ram.tier = TierKind::kRam;
  ram.stats.block_bytes = 1000;
  ram.stats.blocks = 2;
  ram.stats.evictions = 3;
  BankTierStats ssd;
  ssd.tier = TierKind::kSsd;
  ssd.stats.bytes_read = 77;
  ssd.stats.bytes_written = 88;
  bank.tiers = {ram, ssd};
  bank.check_failures["checksum"] = 4;
  std::string text = m.render(bank, 1, 2);
  for (const char* line : {
           "statebank_requests_total{endpoint=\"/v1/completions\",code=\"200\"} 2\n",
           "statebank_requests_total{endpoint=\"/v1/completions\",code=\"400\"} 1\n",
           "statebank_prompt_tokens_total 865\n",
           "statebank_cached_tokens_total{tier=\"ssd\"} 512\n",
           "statebank_cached_tokens_total{tier=\"ram\"} 64\n",
           "statebank_restores_total{mode=\"ssd\"} 1\n",
           "statebank_restores_total{mode=\"cold\"} 2\n",
           "statebank_check_failures_total{kind=\"checksum\"} 4\n",
           "statebank_bank_bytes{tier=\"ram\",kind=\"block\"} 1000\n",
           "statebank_bank_objects{tier=\"ram\",kind=\"block\"} 2\n",
           "statebank_bank_evictions_total{tier=\"ram\"} 3\n",
           "statebank_bank_read_bytes_total{tier=\"ssd\"} 77\n",
           "statebank_bank_written_bytes_total{tier=\"ssd\"} 88\n",
           "statebank_ssd_read_bytes_total 77\n",
           "statebank_ssd_written_bytes_total 88\n",
           "statebank_queue_depth 1\n",
           "statebank_time_to_first_token_seconds_bucket{le=\"0.005\"} 0\n",
           "statebank_time_to_first_token_seconds_bucket{le=\"0.01\"} 1\n",
           "statebank_time_to_first_token_seconds_bucket{le=\"0.05\"} 2\n",
           "statebank_time_to_first_token_seconds_bucket{le=\"2.5\"} 2\n",
           "statebank_time_to_first_token_seconds_bucket{le=\"5\"} 4\n",
           "statebank_time_to_first_token_seconds_bucket{le=\"+Inf\"} 4\n",
           "statebank_time_to_first_token_seconds_count 4\n",
           "statebank_prefix_hits_total{extent=\"full\"} 1\n",
           "statebank_prefix_hits_total{extent=\"partial\"} 1\n",
           "statebank_prefix_misses_total{reason=\"diverged\"} 1\n",
           "statebank_prefix_misses_total{reason=\"no_entry\"} 1\n",
           "statebank_prefix_misses_total{reason=\"other_namespace\"} 1\n",
           "statebank_prefix_misses_total{reason=\"evicted\"} 0\n",
           "statebank_restore_bytes_bucket{le=\"100000\"} 1\n",
           "statebank_restore_bytes_bucket{le=\"4000000\"} 1\n",
           "statebank_restore_bytes_bucket{le=\"16000000\"} 2\n",
           "statebank_restore_bytes_count 2\n",
           "statebank_restore_bytes_sum 5001000\n",
           "statebank_restore_seconds_bucket{le=\"0.005\"} 1\n",
           "statebank_restore_seconds_bucket{le=\"0.01\"} 2\n",
           "statebank_restore_seconds_count 2\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  // Each family's samples follow its own TYPE line (no interleaving).
  std::string last_family;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("# TYPE ", 0) == 0) {
      last_family = line.substr(7, line.find(' ', 7) - 7);
    } else if (line[0] != '#') {
      std::string name = line.substr(0, line.find_first_of("{ "));
      EXPECT_EQ(name.rfind(last_family, 0), 0u) << line;
    }
  }
}

}  // namespace
}  // namespace sb
