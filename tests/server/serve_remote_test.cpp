// Replicas sharing prefixes through Redis, end to end: real `statebank
// serve` processes (each with its own port, RAM and SSD directory) and one
// real redis-server started by the test. Every bank response is compared
// with the same request with X-Cache-Mode: bypass, bit for bit, while Redis
// is healthy, killed during a restore or during writes, restarted empty,
// flushed, stopped longer than the time-out, full of damaged or foreign
// values, or missing a middle block evicted under maxmemory; and each
// replica keeps serving through all of it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <utility>

#include "bank/format.h"
#include "tests/server/bypass_compare.h"
#include "tests/server/remote_replicas.h"
#include "tests/server/serve_process.h"
#include "tests/util/eventually.h"
#include "tests/util/redis_server.h"

namespace sb::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class ServeRemote : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/sb_serve_remote_XXXXXX";
    root_ = mkdtemp(tmpl);
    const char* tok = std::getenv("SB_TOKENIZER_DIR");
    ASSERT_NE(tok, nullptr) << "SB_TOKENIZER_DIR is not set (run through ctest)";
    for (auto [dir, seed] : {std::pair{&model_, "3"}, std::pair{&other_model_, "4"}}) {
      *dir = root_ + "/model" + seed;
      ASSERT_EQ(run_command({SB_STATEBANK_BIN, "gen-model", "--arch", "qwen3_next", "--preset", "tiny", "--seed", seed,
                             "--tokenizer", tok, *dir}),
                0);
    }
    // The replicas' shared MAC key (--remote-secret-file), and another one.
    for (auto [file, text] : {std::pair{&secret_, "replicas-shared-secret-0123456789"},
                              std::pair{&other_secret_, "another-secret-entirely-9876543210"}}) {
      *file = root_ + "/" + std::string(text).substr(0, 8) + ".secret";
      std::ofstream(*file) << text << "\n";
      ASSERT_EQ(chmod(file->c_str(), 0600), 0);
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // A replica with its own port and bank directory on the shared Redis.
  // `extra` flags come last and win.
  std::unique_ptr<ServeProcess> replica(const std::string& name, const RedisServer& redis,
                                        std::vector<std::string> extra = {}, const std::string& model = "") {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::vector<std::string> args = {SB_STATEBANK_BIN,
                                     "serve",
                                     "--model",
                                     model.empty() ? model_ : model,
                                     "--port",
                                     "0",
                                     "--bank-dir",
                                     root_ + "/" + test + "/" + name,
                                     "--block-tokens",
                                     "64",
                                     "--snapshot-every",
                                     "128",
                                     "--threads",
                                     "1",
                                     "--ram-bank",
                                     "256M",
                                     "--remote",
                                     redis.url(),
                                     "--remote-timeout-ms",
                                     "5000",
                                     "--remote-secret-file",
                                     secret_};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<ServeProcess>(args);
  }

  // Two replicas, started side by side (starting is most of a test's time).
  std::pair<std::unique_ptr<ServeProcess>, std::unique_ptr<ServeProcess>> two_replicas(
      const RedisServer& redis, std::vector<std::string> extra_a = {}, std::vector<std::string> extra_b = {}) {
    auto b = std::async(std::launch::async, [&] { return replica("b", redis, extra_b); });
    auto a = replica("a", redis, extra_a);
    return {std::move(a), b.get()};
  }

  static std::string root_, model_, other_model_, secret_, other_secret_;
};
std::string ServeRemote::root_, ServeRemote::model_, ServeRemote::other_model_, ServeRemote::secret_,
    ServeRemote::other_secret_;

std::string metrics_of(const ServeProcess& server) {
  auto c = server.client();
  auto r = c.Get("/metrics");
  return r ? r->body : "";
}

// The values in Redis by (kind, position), read from their headers.
std::map<std::pair<ObjectKind, int64_t>, std::string> objects_by_position(const RedisServer& redis) {
  std::map<std::pair<ObjectKind, int64_t>, std::string> out;
  for (const auto& k : redis.keys("statebank:*")) {
    const std::string head = redis.command({"GETRANGE", k, "0", std::to_string(kObjectHeaderBytes - 1)}).str;
    ObjectHeader h;
    if (decode_header(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(head.data()), head.size()), &h).is_ok())
      out[{h.kind, h.position}] = k;
  }
  return out;
}

TEST_F(ServeRemote, AReplicaRestoresWhatAnotherPrefilled) {
  RedisServer redis;
  auto other_started = std::async(std::launch::async, [&] { return replica("other", redis, {}, other_model_); });
  auto [a, b] = two_replicas(redis);
  auto ca = a->client(), cb = b->client();

  json first = served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(1), tail(1))));
  EXPECT_EQ(first["restore"]["mode"], "cold");
  wait_written(*a);
  EXPECT_GE(redis.keys("statebank:blk:*").size(), 6u);

  json on_b = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(1), tail(2))));
  EXPECT_EQ(on_b["restore"]["mode"], "remote");
  EXPECT_EQ(on_b["usage"]["prompt_tokens_details"]["cached_tokens"], 384);
  EXPECT_EQ(on_b["restore"]["tiers"]["remote"]["objects"], 7);  // blocks 1..6 and the snapshot at 384
  EXPECT_EQ(on_b["restore"]["tiers"]["remote"]["bytes"], on_b["restore"]["bytes_read"]);
  EXPECT_GT(on_b["restore"]["bytes_read"].get<int64_t>(), 0);

  // Promoted into B's RAM.
  json again = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(1), tail(3))));
  EXPECT_EQ(again["restore"]["mode"], "ram");
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"], 384);

  // A longer prefix prefilled on A: B takes the start from its RAM and the rest from Redis.
  const auto longer = concat(prefix(1), ids(300, 5000, 11));
  served_equals_bypass(ca, "/v1/completions", completion(concat(longer, tail(4))));
  wait_written(*a);
  json mixed = served_equals_bypass(cb, "/v1/completions", completion(concat(longer, tail(5))));
  EXPECT_EQ(mixed["restore"]["mode"], "mixed");
  EXPECT_EQ(mixed["usage"]["prompt_tokens_details"]["cached_tokens"], 640);
  EXPECT_GT(mixed["restore"]["tiers"]["ram"]["objects"].get<int>(), 0);
  EXPECT_GT(mixed["restore"]["tiers"]["remote"]["objects"].get<int>(), 0);

  // A chat prefix works the same way.
  std::string system(1500, ' ');
  for (size_t i = 0; i < system.size(); ++i) system[i] = "replicas share what one of them prefilled. "[i % 43];
  json chat = {{"messages", {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", "Hi."}}}},
               {"max_tokens", 5},
               {"logprobs", true},
               {"top_logprobs", 3}};
  served_equals_bypass(ca, "/v1/chat/completions", chat);
  wait_written(*a);
  chat["messages"][1]["content"] = "Hello, other replica.";
  json chat_b = served_equals_bypass(cb, "/v1/chat/completions", chat);
  EXPECT_EQ(chat_b["restore"]["mode"], "remote");
  EXPECT_GT(chat_b["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);

  const std::string m = metrics_of(*b);
  EXPECT_NE(m.find("statebank_restores_total{mode=\"remote\"} 2\n"), std::string::npos) << m;
  EXPECT_NE(m.find("statebank_restores_total{mode=\"mixed\"} 1\n"), std::string::npos) << m;
  EXPECT_EQ(m.find("statebank_bank_hits_total{tier=\"remote\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("statebank_remote_available 1\n"), std::string::npos) << m;
  EXPECT_EQ(m.find("statebank_remote_wire_bytes_total{direction=\"received\"} 0\n"), std::string::npos) << m;

  // A replica of another model on the same Redis shares nothing (the model
  // fingerprint is inside every key) and fails no check.
  auto other = other_started.get();
  auto co = other->client();
  json foreign = served_equals_bypass(co, "/v1/completions", completion(concat(prefix(1), tail(6))));
  EXPECT_EQ(foreign["restore"]["mode"], "cold");
  EXPECT_EQ(foreign["restore"]["matched_tokens"], 0);
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
  EXPECT_EQ(other->stop(), 0);
}

// CLIENT PAUSE WRITE holds write commands and lets reads through: with an
// expiry, a restore's reads are GETEX (a write), so B gets past its EXISTS
// probe and then waits inside the read of the objects, where Redis dies.
TEST_F(ServeRemote, RedisKilledDuringARestoreThenRestartedEmpty) {
  RedisServer redis;
  auto [a, b] = two_replicas(redis, {}, {"--remote-timeout-ms", "60000"});
  auto ca = a->client(), cb = b->client();
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(2), tail(1))));
  wait_written(*a);

  const uint64_t round_trips = remote_of(*b)["round_trips"].get<uint64_t>();
  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", "60000", "WRITE"}).str, "OK");
  const json body = completion(concat(prefix(2), tail(2)));
  auto served = std::async(std::launch::async, [&] {
    auto c = b->client();
    return post(c, "/v1/completions", body, false);
  });
  ASSERT_TRUE(eventually([&] { return remote_of(*b)["in_flight"] == 1; }));
  EXPECT_EQ(remote_of(*b)["round_trips"].get<uint64_t>(), round_trips + 2);  // the probe answered; the read waits
  redis.kill();
  const json got = served.get();
  expect_equal_to_bypass(got, post(cb, "/v1/completions", body, true));
  EXPECT_EQ(got["restore"]["mode"], "cold");
  json r = remote_of(*b);
  EXPECT_EQ(r["available"], 0);
  EXPECT_EQ(r["failures"], 1);
  EXPECT_EQ(r["timeouts"], 0);

  // Redis down: both replicas serve, cold and equal.
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(3), tail(1))));
  served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(3), tail(2))));

  redis.restart();  // empty
  ASSERT_TRUE(eventually([&] { return remote_of(*a)["available"] == 1 && remote_of(*b)["available"] == 1; }));
  json empty = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(2), tail(3))));
  EXPECT_NE(empty["restore"]["mode"], "remote");
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(4), tail(1))));
  wait_written(*a);
  json back = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(4), tail(2))));
  EXPECT_EQ(back["restore"]["mode"], "remote");
  EXPECT_EQ(back["usage"]["prompt_tokens_details"]["cached_tokens"], 384);
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

// CLIENT PAUSE WRITE again: A's lookup (EXISTS) passes, its response comes
// back, and its background SETs wait, until Redis dies under them.
TEST_F(ServeRemote, RedisKilledDuringWrites) {
  RedisServer redis;
  auto [a, b] = two_replicas(redis, {"--remote-timeout-ms", "60000"}, {});
  auto ca = a->client(), cb = b->client();
  ASSERT_EQ(redis.command({"CLIENT", "PAUSE", "60000", "WRITE"}).str, "OK");
  json first = served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(6), tail(1))));
  EXPECT_EQ(first["restore"]["mode"], "cold");
  ASSERT_TRUE(eventually([&] { return remote_of(*a)["in_flight"] == 1; }));  // the writer waits on Redis
  EXPECT_GT(remote_of(*a)["queued"].get<int>(), 0);
  redis.kill();
  ASSERT_TRUE(eventually([&] { return remote_of(*a)["queued"] == 0; }));
  json r = remote_of(*a);
  EXPECT_EQ(r["available"], 0);
  EXPECT_GT(r["dropped_puts"].get<int>(), 0);
  EXPECT_EQ(r["bytes_written"], 0);
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(6), tail(2))));  // A still serves

  redis.restart();
  ASSERT_TRUE(eventually([&] { return remote_of(*a)["available"] == 1; }));
  json on_b = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(6), tail(3))));
  EXPECT_EQ(on_b["restore"]["mode"], "cold");
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(7), tail(1))));
  wait_written(*a);
  json back = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(7), tail(2))));
  EXPECT_EQ(back["restore"]["mode"], "remote");
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

// SIGSTOP for longer than the time-out. The bound is shown structurally:
// the response arrives while Redis is still stopped (without the time-out it
// never would), the breaker counted one time-out, and the next request sends
// nothing at all (skipped calls grow, round trips do not).
TEST_F(ServeRemote, RedisStoppedLongerThanTheTimeOut) {
  RedisServer redis;
  auto [a, b] = two_replicas(redis, {}, {"--remote-timeout-ms", "300"});
  auto ca = a->client(), cb = b->client();
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(8), tail(1))));
  wait_written(*a);

  redis.pause();
  json first = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(8), tail(2))));
  EXPECT_EQ(first["restore"]["mode"], "cold");
  EXPECT_LT(first["restore"]["lookup_ms"].get<double>(), 300 + 10000);  // generous: one time-out plus a loaded machine
  json r = remote_of(*b);
  EXPECT_EQ(r["available"], 0);
  EXPECT_EQ(r["timeouts"], 1);
  EXPECT_EQ(r["trips"], 1);
  const auto round_trips = r["round_trips"].get<uint64_t>();
  const auto skipped = r["skipped_calls"].get<uint64_t>();
  json second = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(9), tail(2))));
  EXPECT_EQ(second["restore"]["mode"], "cold");
  r = remote_of(*b);
  EXPECT_EQ(r["round_trips"].get<uint64_t>(), round_trips);
  EXPECT_GT(r["skipped_calls"].get<uint64_t>(), skipped);
  EXPECT_EQ(r["timeouts"], 1);
  const std::string m = metrics_of(*b);
  EXPECT_NE(m.find("statebank_remote_available 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("statebank_remote_timeouts_total 1\n"), std::string::npos) << m;

  redis.resume();
  ASSERT_TRUE(eventually([&] { return remote_of(*b)["available"] == 1; }));
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(10), tail(1))));
  wait_written(*a);
  json back = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(10), tail(2))));
  EXPECT_EQ(back["restore"]["mode"], "remote");
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

TEST_F(ServeRemote, FlushallBetweenTwoRequests) {
  RedisServer redis;
  auto [a, b] = two_replicas(redis);
  auto ca = a->client(), cb = b->client();
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(11), tail(1))));
  wait_written(*a);
  ASSERT_EQ(redis.command({"FLUSHALL"}).str, "OK");
  json gone = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(11), tail(2))));
  EXPECT_EQ(gone["restore"]["mode"], "cold");
  EXPECT_EQ(remote_of(*b)["available"], 1);
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(12), tail(1))));
  wait_written(*a);
  json back = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(12), tail(2))));
  EXPECT_EQ(back["restore"]["mode"], "remote");
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

// Values overwritten with garbage, truncated, replaced with another key's
// valid object, or with another model's object of the same position: each a
// counted miss on B, which restores only what precedes it (or nothing), and
// deletes the bad value so that its own publish heals Redis for a third
// replica (C), which then restores the whole prefix.
TEST_F(ServeRemote, DamagedOrForeignValuesAreCountedMissesAndHeal) {
  RedisServer redis;
  auto other = std::async(std::launch::async, [&] { return replica("other", redis, {}, other_model_); });
  auto c_started = std::async(std::launch::async, [&] { return replica("c", redis); });
  auto [a, b] = two_replicas(redis);
  auto ca = a->client(), cb = b->client();
  auto c = c_started.get();
  auto cc = c->client();
  using Pos = std::pair<ObjectKind, int64_t>;
  const Pos block_64{ObjectKind::kBlock, 64}, block_128{ObjectKind::kBlock, 128}, block_256{ObjectKind::kBlock, 256},
      snap_384{ObjectKind::kSnapshot, 384};

  // Another model's objects for the same prompt, set aside.
  std::string foreign_block_64;
  {
    auto m = other.get();
    auto cm = m->client();
    served_equals_bypass(cm, "/v1/completions", completion(concat(prefix(20), tail(1))));
    wait_written(*m);
    foreign_block_64 = redis.command({"GET", objects_by_position(redis).at(block_64)}).str;
    ASSERT_FALSE(foreign_block_64.empty());
    EXPECT_EQ(m->stop(), 0);
    ASSERT_EQ(redis.command({"FLUSHALL"}).str, "OK");
  }

  struct Case {
    const char* what;
    Pos target;
    std::function<std::string(const std::map<Pos, std::string>&)> value;
    int64_t restore_point;  // where B's walk ends
  };
  std::vector<Case> cases = {
      {"garbage", block_128, [](const auto&) { return std::string(5000, '\x5a'); }, 128},
      {"truncated", snap_384,
       [&](const auto& objects) {
         std::string v = redis.command({"GET", objects.at(snap_384)}).str;
         return v.substr(0, v.size() / 2);
       },
       256},
      {"another key's valid object", block_256,
       [&](const auto& objects) { return redis.command({"GET", objects.at(block_64)}).str; }, 256},
      {"another model's object", block_64, [&](const auto&) { return foreign_block_64; }, 0},
  };
  int seed = 20;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_EQ(redis.command({"FLUSHALL"}).str, "OK");
    served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(seed), tail(1))));
    wait_written(*a);
    const auto objects = objects_by_position(redis);
    ASSERT_EQ(objects.size(), 9u);  // 6 blocks, 3 snapshots
    const std::string key = objects.at(c.target);
    ASSERT_EQ(redis.command({"SET", key, c.value(objects)}).str, "OK");

    json on_b = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(seed), tail(2))), false);
    EXPECT_EQ(on_b["restore"]["restore_point"], c.restore_point);
    EXPECT_GE(on_b["restore"]["check_failures"].get<int>(), 1);
    wait_written(*b);  // B deleted the bad value and published its own computation

    // C has never seen this prefix: it restores all of it from Redis.
    json healed = served_equals_bypass(cc, "/v1/completions", completion(concat(prefix(seed), tail(3))));
    EXPECT_EQ(healed["restore"]["mode"], "remote");
    EXPECT_EQ(healed["usage"]["prompt_tokens_details"]["cached_tokens"], 384);
    ++seed;
  }
  EXPECT_GE(remote_of(*b)["check_failures"].get<int>(), 4);
  EXPECT_GE(remote_of(*b)["deleted"].get<int>(), 4);
  const std::string m = metrics_of(*b);
  EXPECT_EQ(m.find("statebank_check_failures_total{kind=\"remote_read\"} 0\n"), std::string::npos) << m;
  EXPECT_EQ(remote_of(*c)["check_failures"], 0);
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
  EXPECT_EQ(c->stop(), 0);
}

// Redis itself evicts the middle block at 192 under maxmemory
// (RedisServer::evict_only).
TEST_F(ServeRemote, AMiddleBlockEvictedUnderMaxmemoryRestoresOnlyUpToTheGap) {
  RedisServer redis({"--maxmemory-policy", "volatile-ttl"});
  auto [a, b] = two_replicas(redis);
  auto ca = a->client(), cb = b->client();
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(30), tail(1))));
  wait_written(*a);
  ASSERT_TRUE(redis.evict_only(objects_by_position(redis).at({ObjectKind::kBlock, 192})));

  json on_b = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(30), tail(2))));
  EXPECT_EQ(on_b["restore"]["mode"], "remote");
  EXPECT_EQ(on_b["restore"]["matched_tokens"], 192);  // blocks 1..3; block 4 is the hole
  EXPECT_EQ(on_b["restore"]["restore_point"], 128);   // the last snapshot before it
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

TEST_F(ServeRemote, StartsWithoutRedisAndUsesItOnceItAnswers) {
  RedisServer redis;
  redis.kill();
  auto [a, b] = two_replicas(redis);
  auto ca = a->client(), cb = b->client();
  EXPECT_EQ(remote_of(*a)["available"], 0);
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(40), tail(1))));
  redis.restart();
  ASSERT_TRUE(eventually([&] { return remote_of(*a)["available"] == 1 && remote_of(*b)["available"] == 1; }));
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(41), tail(1))));
  wait_written(*a);
  json back = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(41), tail(2))));
  EXPECT_EQ(back["restore"]["mode"], "remote");
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

TEST_F(ServeRemote, APasswordComesFromAFile) {
  RedisServer redis({"--requirepass", "pw-from-file"});
  const std::string file = root_ + "/redis-password";
  {
    std::ofstream out(file);
    out << "pw-from-file\n";
  }
  // Without it the server refuses to start, with one clear line.
  EXPECT_EQ(run_command({SB_STATEBANK_BIN, "serve", "--model", model_, "--port", "0", "--ssd", "off", "--remote",
                         redis.url(), "--remote-secret-file", secret_}),
            2);
  auto [a, b] = two_replicas(redis, {"--remote-password-file", file}, {"--remote-password-file", file});
  auto ca = a->client(), cb = b->client();
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(50), tail(1))));
  wait_written(*a);
  json back = served_equals_bypass(cb, "/v1/completions", completion(concat(prefix(50), tail(2))));
  EXPECT_EQ(back["restore"]["mode"], "remote");
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

// Issue 34, finding 8: whoever can write Redis rewrites a snapshot with
// other numbers and recomputes every unkeyed checksum (a valid image in the
// object format). Before, every replica installed it; now its MAC is wrong:
// a counted miss, never installed, and the served logprobs equal bypass.
TEST_F(ServeRemote, AValueRewrittenWithRecomputedChecksumsIsACountedMissNeverInstalled) {
  RedisServer redis;
  auto [a, b] = two_replicas(redis);
  auto ca = a->client();
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(60), tail(1))));
  wait_written(*a);
  const std::string name = objects_by_position(redis).at({ObjectKind::kSnapshot, 384});
  const std::string value = redis.command({"GET", name}).str;
  // The attacker's edit: decode the image (without whatever follows it),
  // change the recurrent state, encode again with fresh checksums.
  ObjectHeader h;
  ASSERT_TRUE(decode_header(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()), &h)
                  .is_ok());
  ASSERT_LE(h.file_bytes(), value.size());
  Object o;
  ASSERT_TRUE(decode_object(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), h.file_bytes()),
                            &h, &o)
                  .is_ok());
  ASSERT_EQ(o.dtype, DType::kF32);
  for (auto& part : o.parts)
    for (size_t i = 0; i + 4 <= part.size(); i += 4) {
      float v;
      std::memcpy(&v, part.data() + i, 4);
      v = 0.5f - 3.0f * v;
      std::memcpy(part.data() + i, &v, 4);
    }
  const std::vector<uint8_t> forged = encode_object(o, h.retention, h.schema_digest);
  Object check;
  ObjectHeader check_h;
  ASSERT_TRUE(decode_object(forged, &check_h, &check).is_ok()) << "the forgery passes every unkeyed check";
  // With the original tag after it, and without one.
  for (bool keep_tail : {true, false}) {
    SCOPED_TRACE(keep_tail ? "the old tag kept" : "no tag");
    std::string v(forged.begin(), forged.end());
    if (keep_tail) v += value.substr(h.file_bytes());
    ASSERT_EQ(redis.command({"SET", name, v}).str, "OK");
    auto cb = b->client();
    const json on_b = served_equals_bypass(cb, "/v1/completions",
                                           completion(concat(prefix(60), tail(keep_tail ? 2 : 3))), false);
    EXPECT_LT(on_b["restore"]["restore_point"].get<int64_t>(), 384) << "the forged snapshot was installed";
    EXPECT_GE(on_b["restore"]["check_failures"].get<int64_t>(), 1);
    // B's RAM tier now holds the chain: the second round must go to Redis again.
    ASSERT_EQ(b->stop(), 0);
    b = replica(keep_tail ? "b2" : "b3", redis);
  }
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(b->stop(), 0);
}

// The MAC is counted where an operator looks, and a replica with another
// secret never installs what the others wrote (and serves bypass's answer).
TEST_F(ServeRemote, AReplicaWithoutTheRightSecretNeverInstallsAndCountsMacFailures) {
  RedisServer redis;
  auto [a, w] = two_replicas(redis, {}, {"--remote-secret-file", other_secret_});
  auto ca = a->client(), cw = w->client();
  served_equals_bypass(ca, "/v1/completions", completion(concat(prefix(70), tail(1))));
  wait_written(*a);
  const json on_w = served_equals_bypass(cw, "/v1/completions", completion(concat(prefix(70), tail(2))), false);
  EXPECT_EQ(on_w["restore"]["restore_point"], 0);
  EXPECT_NE(on_w["restore"]["mode"], "remote");
  EXPECT_GE(remote_of(*w)["mac_failures"].get<int64_t>(), 1);
  EXPECT_EQ(remote_of(*a)["mac_failures"], 0);
  const std::string m = metrics_of(*w);
  EXPECT_NE(m.find("statebank_remote_mac_failures_total "), std::string::npos) << m;
  EXPECT_EQ(m.find("statebank_remote_mac_failures_total 0\n"), std::string::npos) << m;
  EXPECT_EQ(a->stop(), 0);
  EXPECT_EQ(w->stop(), 0);
}

// Runs the binary; its exit status and what it printed on stderr.
std::pair<int, std::string> run_for_stderr(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const auto& a : argv) cmd += "'" + a + "' ";
  cmd += "2>&1 >/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(ServeRemoteCli, RefusesBadRemoteFlagsBeforeLoadingAnything) {
  // The model path does not exist: each refusal must come before it is looked at.
  auto refusal = [](std::vector<std::string> extra) {
    std::vector<std::string> argv = {SB_STATEBANK_BIN, "serve", "--model", "/nonexistent"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto [code, err] = run_for_stderr(argv);
    EXPECT_EQ(code, 2) << err;
    EXPECT_EQ(err.find("nonexistent"), std::string::npos) << err;
    return err;
  };
  EXPECT_NE(refusal({"--remote", "http://127.0.0.1:6379"}).find("must start with redis://"), std::string::npos);
  const std::string creds = refusal({"--remote", "redis://user:pw-in-url@127.0.0.1:6379"});
  EXPECT_NE(creds.find("--remote-password-file"), std::string::npos) << creds;
  EXPECT_EQ(creds.find("pw-in-url"), std::string::npos) << creds;
  EXPECT_NE(refusal({"--remote", "redis://127.0.0.1:70000"}).find("port"), std::string::npos);
  EXPECT_NE(refusal({"--remote-ttl", "60"}).find("--remote-ttl needs --remote"), std::string::npos);
  EXPECT_NE(refusal({"--remote", "redis://127.0.0.1:6379", "--remote-timeout-ms", "0"}).find("--remote-timeout-ms"),
            std::string::npos);
  EXPECT_NE(refusal({"--remote", "redis://127.0.0.1:6379", "--remote-password-file", "/nothing/pw"})
                .find("cannot read --remote-password-file"),
            std::string::npos);
  // The MAC key: required, private, long enough; it never appears in a message.
  EXPECT_NE(refusal({"--remote", "redis://127.0.0.1:6379"}).find("--remote needs --remote-secret-file"),
            std::string::npos);
  EXPECT_NE(refusal({"--remote-secret-file", "/nothing/s"}).find("--remote-secret-file needs --remote"),
            std::string::npos);
  char tmpl[] = "/tmp/sb_remote_secret_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string file = dir + "/secret";
  std::ofstream(file) << "a-long-enough-secret-0123456789\n";
  for (mode_t mode : {0644, 0640, 0604, 0660}) {
    ASSERT_EQ(chmod(file.c_str(), mode), 0);
    const std::string err = refusal({"--remote", "redis://127.0.0.1:6379", "--remote-secret-file", file});
    EXPECT_NE(err.find("may be read or written by other users"), std::string::npos) << err;
    EXPECT_EQ(err.find("a-long-enough"), std::string::npos) << err;
  }
  std::ofstream(file) << "short\n";
  ASSERT_EQ(chmod(file.c_str(), 0600), 0);
  EXPECT_NE(refusal({"--remote", "redis://127.0.0.1:6379", "--remote-secret-file", file}).find("fewer than 16"),
            std::string::npos);
  EXPECT_NE(refusal({"--remote", "redis://127.0.0.1:6379", "--remote-secret-file", dir + "/none"})
                .find("cannot read --remote-secret-file"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb::testing
