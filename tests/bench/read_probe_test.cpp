// bench/read_probe.h: the probe's summaries of its passes and their JSON, the
// members runtime_bench prints (also alone, with --probe) and
// compare_llama.py reads.
#include "bench/read_probe.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace sb::bench {
namespace {

ReadBandwidth probe_of(int threads, std::vector<double> passes) {
  ReadBandwidth b;
  b.threads = threads;
  b.passes = std::move(passes);
  return b;
}

TEST(ReadProbe, BestMedianWorstAndMerge) {
  ReadBandwidth b = probe_of(2, {40e9, 60e9, 35e9});
  EXPECT_EQ(b.best(), 60e9);
  EXPECT_EQ(b.median(), 40e9);
  EXPECT_EQ(b.worst(), 35e9);
  b.merge(probe_of(2, {50e9}));
  EXPECT_EQ(b.passes.size(), 4u);
  EXPECT_EQ(b.median(), 45e9);
  EXPECT_EQ(b.best(), 60e9);
}

// Every thread count's best pass and its passes in the order run, whole bytes per second.
TEST(ReadProbe, JsonHasEachThreadCountsBestAndPasses) {
  const std::map<int64_t, ReadBandwidth> probes = {{1, probe_of(1, {20.4e9, 21.6e9})},
                                                   {2, probe_of(2, {35e9, 64.4e9, 55.5e9})}};
  const nlohmann::json j = nlohmann::json::parse("{" + read_bandwidth_json(probes) + "}");
  EXPECT_EQ(j["read_bandwidth"], nlohmann::json::parse(R"({"1": 21600000000, "2": 64400000000})"));
  EXPECT_EQ(j["read_bandwidth_passes"],
            nlohmann::json::parse(R"({"1": [20400000000, 21600000000], "2": [35000000000, 64400000000, 55500000000]})"));
  EXPECT_EQ(j.size(), 2u);
}

TEST(ReadProbe, JsonOfNoProbesIsEmptyMembers) {
  EXPECT_EQ(read_bandwidth_json({}), R"("read_bandwidth": {}, "read_bandwidth_passes": {})");
}

}  // namespace
}  // namespace sb::bench
