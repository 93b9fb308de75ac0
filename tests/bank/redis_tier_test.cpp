// The Redis tier against a real redis-server started by the test: round
// trips, one round trip per batch, values that are damaged or not ours
// (always a counted miss, never returned), expiry, and a sick server: killed
// mid-read and mid-write, restarted empty, stopped longer than the time-out,
// unreachable at start, refusing the password.
#include "bank/remote/redis_tier.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "bank/format.h"
#include "tests/bank/ssd_test_util.h"
#include "tests/util/eventually.h"
#include "tests/util/redis_server.h"

namespace sb {
namespace {

using namespace sb::testing;
using std::chrono::milliseconds;

constexpr char kSecret[] = "redis-tier-test-secret-0123456789";

RedisOptions options_for(const RedisServer& server, milliseconds timeout = milliseconds(2000)) {
  RedisOptions o;
  EXPECT_TRUE(parse_redis_url(server.url(), &o.address).is_ok());
  o.secret = kSecret;
  o.timeout = timeout;
  o.retry_interval = milliseconds(50);
  o.schema = ssd_test_schema();
  o.verify_block = [](const Object& b) { return chain_key(b.parent, b.tokens) == b.key; };
  o.log = [](const std::string&) {};  // tests assert on counters, not on log lines
  return o;
}

std::unique_ptr<RedisTier> open_redis(RedisOptions o) {
  std::unique_ptr<RedisTier> t;
  Status s = RedisTier::open(std::move(o), &t);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return t;
}

// One read per object, in order.
std::vector<TierRead> reads_of(const std::vector<ObjectRef>& objects) {
  std::vector<TierRead> reads;
  for (const auto& o : objects) reads.push_back(TierRead{o->kind, o->key, nullptr, Status()});
  return reads;
}

void put_all(RedisTier& t, const std::vector<ObjectRef>& objects) {
  for (const auto& o : objects) ASSERT_TRUE(t.put(o, Retention::kBlock).is_ok());
  ASSERT_TRUE(t.flush().is_ok());
}

TEST(RedisUrl, ParsesHostPortAndDatabase) {
  RedisAddress a;
  ASSERT_TRUE(parse_redis_url("redis://127.0.0.1:6380/2", &a).is_ok());
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 2);
  ASSERT_TRUE(parse_redis_url("redis://cache.internal", &a).is_ok());
  EXPECT_EQ(a.host, "cache.internal");
  EXPECT_EQ(a.port, 6379);
  EXPECT_EQ(a.db, 0);
  ASSERT_TRUE(parse_redis_url("redis://[::1]:7000/", &a).is_ok());
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.url(), "redis://[::1]:7000/0");
}

TEST(RedisUrl, RefusesWhatItCannotUseWithAReason) {
  RedisAddress a;
  auto why = [&](const char* url) {
    Status s = parse_redis_url(url, &a);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << url;
    return s.message();
  };
  EXPECT_NE(why("http://127.0.0.1:6379").find("must start with redis://"), std::string::npos);
  EXPECT_NE(why("rediss://127.0.0.1:6379").find("TLS"), std::string::npos);
  EXPECT_NE(why("redis://user:secret@127.0.0.1:6379").find("--remote-password-file"), std::string::npos);
  EXPECT_NE(why("redis://127.0.0.1:0").find("port"), std::string::npos);
  EXPECT_NE(why("redis://127.0.0.1:99999").find("port"), std::string::npos);
  EXPECT_NE(why("redis://127.0.0.1:").find("port"), std::string::npos);
  EXPECT_NE(why("redis://:6379").find("host"), std::string::npos);
  EXPECT_NE(why("redis://127.0.0.1:6379/x").find("database"), std::string::npos);
  EXPECT_NE(why("redis://[::1:6379").find("]"), std::string::npos);
  EXPECT_NE(why("redis://::1:6379").find("brackets"), std::string::npos);
  // The secret never shows in the message.
  EXPECT_EQ(why("redis://user:secret@127.0.0.1:6379").find("secret"), std::string::npos);
}

TEST(RedisTier, RoundTripsEveryObjectInOneRoundTripPerBatch) {
  RedisServer server;
  auto t = open_redis(options_for(server));
  auto chain = make_chain(1, 5);
  std::vector<TierProbe> probes;
  for (const auto& o : chain.all()) probes.push_back(TierProbe{o->kind, o->key, true});
  t->contains_many(probes);
  for (const auto& p : probes) EXPECT_FALSE(p.present);

  put_all(*t, chain.all());
  // Every value is the object's image and its MAC.
  uint64_t image_bytes = 0;
  for (const auto& o : chain.all()) image_bytes += encoded_size(*o) + RedisTier::kTagBytes;
  EXPECT_EQ(t->stats().bytes_written, image_bytes);
  EXPECT_EQ(server.keys("statebank:blk:*").size(), 5u);
  EXPECT_EQ(server.keys("statebank:snp:*").size(), 5u);
  EXPECT_EQ(server.command({"STRLEN", t->redis_key(ObjectKind::kBlock, chain.blocks[0]->key)}).integer,
            static_cast<long long>(encoded_size(*chain.blocks[0]) + RedisTier::kTagBytes));

  const uint64_t trips = t->redis_stats().round_trips;
  t->contains_many(probes);
  for (const auto& p : probes) EXPECT_TRUE(p.present);
  EXPECT_EQ(t->redis_stats().round_trips, trips + 1);

  std::vector<TierRead> reads = reads_of(chain.all());
  const RedisStats before = t->redis_stats();
  t->get_many(reads);
  const RedisStats after = t->redis_stats();
  EXPECT_EQ(after.round_trips, before.round_trips + 1);  // ten GETs, one round trip
  for (size_t i = 0; i < reads.size(); ++i) {
    ASSERT_TRUE(reads[i].status.is_ok()) << reads[i].status.to_string();
    EXPECT_TRUE(same_object(*chain.all()[i], *reads[i].object));
  }
  EXPECT_EQ(after.tier.hits, 10u);
  EXPECT_EQ(after.tier.bytes_read, image_bytes);
  // The wire carries the images plus a little framing.
  EXPECT_GT(after.wire_bytes_received - before.wire_bytes_received, image_bytes);
  EXPECT_LT(after.wire_bytes_received - before.wire_bytes_received, image_bytes + 10 * 32);

  ObjectRef one;
  ASSERT_TRUE(t->get(ObjectKind::kSnapshot, chain.snapshots[2]->key, &one).is_ok());
  EXPECT_TRUE(same_object(*chain.snapshots[2], *one));
  EXPECT_EQ(t->get(ObjectKind::kBlock, Key{1, 2}, &one).code(), Code::kNotFound);
  EXPECT_EQ(t->stats().misses, 1u);
  EXPECT_EQ(t->stats().check_failures, 0u);
}

TEST(RedisTier, WritesOnlyWhatRedisLacks) {
  RedisServer server;
  auto t = open_redis(options_for(server));
  auto chain = make_chain(2, 3);
  put_all(*t, chain.all());
  const RedisStats first = t->redis_stats();
  // A second replica publishing the same objects sends their names, not their bytes.
  auto other = open_redis(options_for(server));
  put_all(*other, chain.all());
  const RedisStats again = other->redis_stats();
  EXPECT_EQ(again.skipped_writes, 6u);
  EXPECT_EQ(again.tier.bytes_written, 0u);
  EXPECT_LT(again.wire_bytes_sent, first.tier.bytes_written / 2);
}

TEST(RedisTier, KeysExpireFromTheirLastUse) {
  RedisServer server;
  auto o = options_for(server);
  o.ttl = std::chrono::seconds(600);
  auto t = open_redis(o);
  auto chain = make_chain(3, 1);
  put_all(*t, chain.all());
  const std::string name = t->redis_key(ObjectKind::kBlock, chain.blocks[0]->key);
  const long long ttl = server.command({"TTL", name}).integer;
  EXPECT_GT(ttl, 590);
  EXPECT_LE(ttl, 600);
  // A read renews it.
  ASSERT_EQ(server.command({"EXPIRE", name, "5"}).integer, 1);
  ObjectRef got;
  ASSERT_TRUE(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());
  EXPECT_GT(server.command({"TTL", name}).integer, 590);
  // So does a publish of an object Redis already holds.
  ASSERT_EQ(server.command({"EXPIRE", name, "5"}).integer, 1);
  auto other = open_redis(o);
  put_all(*other, chain.blocks);
  EXPECT_GT(server.command({"TTL", name}).integer, 590);
}

// Every way a value can be wrong: each is a counted miss, never returned,
// and deleted so that the next publish replaces it.
TEST(RedisTier, AWrongValueIsACountedMissAndIsDeleted) {
  RedisServer server;
  auto t = open_redis(options_for(server));
  auto chain = make_chain(4, 6);
  put_all(*t, chain.all());
  auto key_of = [&](const ObjectRef& o) { return t->redis_key(o->kind, o->key); };
  // The image a value holds, without its MAC (the cases below are sealed
  // again with the right secret: they test the checks behind the MAC).
  auto image = [&](const ObjectRef& o) {
    const std::string v = server.command({"GET", key_of(o)}).str;
    return v.substr(0, v.size() - RedisTier::kTagBytes);
  };

  // Another schema: the same chain written by a model whose state has other shapes.
  StateSchema other_schema = ssd_test_schema();
  other_schema.components[0].row_elems = 4;
  const std::string foreign_model = [&] {
    auto bytes = encode_object(*chain.blocks[5], Retention::kBlock, schema_digest(other_schema));
    return std::string(bytes.begin(), bytes.end());
  }();
  const std::string good1 = image(chain.blocks[1]);
  const std::string newer = [&] {
    std::string s = image(chain.snapshots[4]);
    s[8] = 9;  // format version 9: a newer statebank's
    return s;
  }();

  struct Case {
    const char* what;
    ObjectRef object;
    std::string value;
  };
  std::vector<Case> cases = {
      {"garbage", chain.blocks[0], std::string(4000, 'x')},
      {"truncated", chain.blocks[1], good1.substr(0, good1.size() - 7)},
      {"one flipped payload bit", chain.blocks[2], [&] { std::string s = image(chain.blocks[2]); s[200] ^= 1; return s; }()},
      {"another key's valid block", chain.blocks[3], image(chain.blocks[4])},
      {"a block in place of a snapshot", chain.snapshots[3], image(chain.blocks[3])},
      {"another model's value", chain.blocks[5], foreign_model},
      {"empty", chain.snapshots[0], ""},
  };
  auto sealed = [&](const ObjectRef& o, const std::string& image) {
    return RedisTier::seal(kSecret, key_of(o),
                           std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(image.data()), image.size()));
  };
  for (const auto& c : cases) ASSERT_EQ(server.command({"SET", key_of(c.object), sealed(c.object, c.value)}).str, "OK");
  ASSERT_EQ(server.command({"DEL", key_of(chain.snapshots[1])}).integer, 1);
  ASSERT_EQ(server.command({"RPUSH", key_of(chain.snapshots[1]), "a list"}).integer, 1);  // not even a string
  ASSERT_EQ(server.command({"SET", key_of(chain.snapshots[4]), sealed(chain.snapshots[4], newer)}).str, "OK");

  std::vector<TierRead> reads;
  for (const auto& c : cases) reads.push_back(TierRead{c.object->kind, c.object->key, nullptr, Status()});
  reads.push_back(TierRead{ObjectKind::kSnapshot, chain.snapshots[1]->key, nullptr, Status()});
  reads.push_back(TierRead{ObjectKind::kSnapshot, chain.snapshots[4]->key, nullptr, Status()});
  t->get_many(reads);
  for (size_t i = 0; i < reads.size(); ++i) {
    EXPECT_EQ(reads[i].status.code(), Code::kCorruption) << (i < cases.size() ? cases[i].what : "other");
    EXPECT_EQ(reads[i].object, nullptr);
  }
  EXPECT_EQ(t->stats().check_failures, reads.size());
  EXPECT_EQ(t->stats().hits, 0u);
  EXPECT_TRUE(t->redis_stats().available);  // bad values are not a sick server

  // Deleted in the background, except the newer statebank's value.
  ASSERT_TRUE(t->flush().is_ok());
  for (const auto& c : cases) EXPECT_EQ(server.command({"EXISTS", key_of(c.object)}).integer, 0) << c.what;
  EXPECT_EQ(server.command({"EXISTS", key_of(chain.snapshots[1])}).integer, 0);
  EXPECT_EQ(server.command({"GET", key_of(chain.snapshots[4])}).str, sealed(chain.snapshots[4], newer));
  EXPECT_EQ(t->redis_stats().deleted, cases.size() + 1);

  // The next publish puts good copies back.
  put_all(*t, chain.all());
  for (const auto& c : cases) {
    ObjectRef got;
    ASSERT_TRUE(t->get(c.object->kind, c.object->key, &got).is_ok()) << c.what;
    EXPECT_TRUE(same_object(*c.object, *got));
  }
}

// Issue 34, finding 8: whoever can write Redis can also recompute unkeyed
// checksums. A value rewritten with other numbers and fresh checksums (a
// valid object image), the same with the old MAC kept, a valid value moved
// under another key, and a value sealed with another secret: each a miss
// counted in mac_failures, never returned.
TEST(RedisTier, AValueWithoutTheRightMacIsACountedMissNeverReturned) {
  RedisServer server;
  auto t = open_redis(options_for(server));
  auto chain = make_chain(5, 4);
  put_all(*t, chain.all());
  auto key_of = [&](const ObjectRef& o) { return t->redis_key(o->kind, o->key); };
  auto image_of = [](const std::vector<uint8_t>& v) {
    return std::span<const uint8_t>(v.data(), v.size());
  };
  auto forge = [&](const ObjectRef& o) {
    Object f = *o;
    for (auto& part : f.parts)
      for (auto& byte : part) byte ^= 0x40;
    return encode_object(f, Retention::kBlock, schema_digest(ssd_test_schema()));
  };
  const std::string good_tag = [&] {
    const std::string v = server.command({"GET", key_of(chain.blocks[0])}).str;
    return v.substr(v.size() - RedisTier::kTagBytes);
  }();
  const std::vector<uint8_t> forged0 = forge(chain.blocks[0]), forged1 = forge(chain.blocks[1]);
  {  // the forgery passes every unkeyed check
    Object o;
    ObjectHeader h;
    ASSERT_TRUE(decode_object(image_of(forged0), &h, &o).is_ok());
  }
  const std::vector<uint8_t> image2 = encode_object(*chain.blocks[2], Retention::kBlock, schema_digest(ssd_test_schema()));
  struct Case {
    const char* what;
    ObjectRef object;
    std::string value;
  };
  const std::vector<Case> cases = {
      {"rewritten, fresh checksums, the old tag kept", chain.blocks[0],
       std::string(forged0.begin(), forged0.end()) + good_tag},
      {"rewritten, fresh checksums, no tag", chain.blocks[1], std::string(forged1.begin(), forged1.end())},
      {"sealed with another secret", chain.blocks[2],
       RedisTier::seal("another-secret-0123456789", key_of(chain.blocks[2]), image_of(image2))},
      {"another key's sealed value", chain.blocks[3], server.command({"GET", key_of(chain.blocks[2])}).str},
      {"shorter than a tag", chain.snapshots[0], "abc"},
  };
  for (const auto& c : cases) ASSERT_EQ(server.command({"SET", key_of(c.object), c.value}).str, "OK");
  for (const auto& c : cases) {
    ObjectRef got;
    EXPECT_EQ(t->get(c.object->kind, c.object->key, &got).code(), Code::kCorruption) << c.what;
    EXPECT_EQ(got, nullptr) << c.what;
  }
  EXPECT_EQ(t->redis_stats().mac_failures, cases.size());
  EXPECT_EQ(t->stats().check_failures, cases.size());
  EXPECT_EQ(t->stats().hits, 0u);

  // A replica with another secret reads nothing that this one wrote.
  ASSERT_TRUE(t->flush().is_ok());
  put_all(*t, chain.all());
  auto o = options_for(server);
  o.secret = "a-replica-with-another-secret";
  auto stranger = open_redis(o);
  std::vector<TierRead> reads = reads_of(chain.all());
  stranger->get_many(reads);
  for (const auto& r : reads) {
    EXPECT_EQ(r.status.code(), Code::kCorruption);
    EXPECT_EQ(r.object, nullptr);
  }
  EXPECT_EQ(stranger->redis_stats().mac_failures, reads.size());
  EXPECT_EQ(stranger->stats().hits, 0u);

  // No secret: refused.
  auto none = options_for(server);
  none.secret.clear();
  std::unique_ptr<RedisTier> refused;
  const Status s = RedisTier::open(none, &refused);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("secret"), std::string::npos);
}

// Negative control: the same reads of untouched values pass, so the test
// above fails for the damage and not for the way it reads.
TEST(RedisTier, UntouchedValuesPassTheSameChecks) {
  RedisServer server;
  auto t = open_redis(options_for(server));
  auto chain = make_chain(4, 6);
  put_all(*t, chain.all());
  std::vector<TierRead> reads = reads_of(chain.all());
  t->get_many(reads);
  for (const auto& r : reads) EXPECT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_EQ(t->stats().check_failures, 0u);
}

TEST(RedisTier, QuarantineDeletesTheValueForEveryReplica) {
  RedisServer server;
  auto t = open_redis(options_for(server));
  auto other = open_redis(options_for(server));
  auto chain = make_chain(5, 2);
  put_all(*t, chain.all());
  const Key& key = chain.blocks[1]->key;
  ASSERT_TRUE(other->contains(ObjectKind::kBlock, key));
  // A check above the tier (the Bank's, compose, the audit) failed on it.
  EXPECT_TRUE(t->quarantine(ObjectKind::kBlock, key, "test"));
  EXPECT_FALSE(t->quarantine(ObjectKind::kBlock, key, "again")) << "counted once";
  EXPECT_EQ(t->stats().quarantined, 1u);
  EXPECT_FALSE(other->contains(ObjectKind::kBlock, key)) << "no replica restores it again";
  EXPECT_TRUE(other->contains(ObjectKind::kBlock, chain.blocks[0]->key));
  ObjectRef o;
  EXPECT_EQ(t->get(ObjectKind::kBlock, key, &o).code(), Code::kNotFound);
}

TEST(RedisTier, AStoppedServerCostsOneTimeOutThenFastMisses) {
  RedisServer server;
  auto o = options_for(server, milliseconds(300));
  o.retry_interval = milliseconds(100);
  auto t = open_redis(o);
  auto chain = make_chain(5, 2);
  put_all(*t, chain.all());

  server.pause();  // SIGSTOP: the socket accepts, nothing answers
  ObjectRef got;
  // Returns while the server is still stopped: the time-out, not the server, ended the call.
  EXPECT_EQ(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).code(), Code::kIoError);
  RedisStats s = t->redis_stats();
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.trips, 1u);
  EXPECT_EQ(s.timeouts, 1u);
  // From now on nothing is sent: misses at once, counted as skipped calls.
  const uint64_t round_trips = s.round_trips;
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[1]->key));
    EXPECT_EQ(t->get(ObjectKind::kBlock, chain.blocks[1]->key, &got).code(), Code::kIoError);
  }
  EXPECT_EQ(t->put(make_chain(6, 1).blocks[0], Retention::kBlock).code(), Code::kResourceExhausted);
  s = t->redis_stats();
  EXPECT_EQ(s.round_trips, round_trips);
  EXPECT_GE(s.skipped_calls, 40u);
  EXPECT_EQ(s.timeouts, 1u);
  EXPECT_EQ(s.dropped_puts, 1u);
  // The background probe brings it back once the server answers.
  EXPECT_TRUE(eventually([&] { return t->redis_stats().probes >= 2; }));
  server.resume();
  ASSERT_TRUE(eventually([&] { return t->redis_stats().available; }));
  ASSERT_TRUE(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());
  EXPECT_TRUE(same_object(*chain.blocks[0], *got));
  EXPECT_EQ(t->redis_stats().trips, 1u);
}

TEST(RedisTier, KilledDuringAReadIsAMissThenRestartedEmptyIsServedAgain) {
  RedisServer server;
  // A long time-out: only the kill can end the read below.
  auto t = open_redis(options_for(server, milliseconds(60000)));
  auto chain = make_chain(7, 4);
  put_all(*t, chain.all());
  server.pause();
  auto reader = std::async(std::launch::async, [&] {
    std::vector<TierRead> reads = reads_of(chain.all());
    t->get_many(reads);
    return reads;
  });
  ASSERT_TRUE(eventually([&] { return t->redis_stats().in_flight == 1; }));
  server.kill();
  auto reads = reader.get();
  for (const auto& r : reads) {
    EXPECT_EQ(r.status.code(), Code::kIoError);
    EXPECT_EQ(r.object, nullptr);
  }
  RedisStats s = t->redis_stats();
  EXPECT_EQ(s.timeouts, 0u);
  EXPECT_EQ(s.failures, 1u);
  EXPECT_FALSE(s.available);

  server.restart();  // empty
  ASSERT_TRUE(eventually([&] { return t->redis_stats().available; }));
  ObjectRef got;
  EXPECT_EQ(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).code(), Code::kNotFound);
  put_all(*t, chain.all());
  ASSERT_TRUE(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());
  EXPECT_TRUE(same_object(*chain.blocks[0], *got));
}

TEST(RedisTier, KilledDuringWritesDropsThemAndRecovers) {
  RedisServer server;
  auto t = open_redis(options_for(server, milliseconds(60000)));
  auto chain = make_chain(8, 4);
  server.pause();
  for (const auto& o : chain.all()) ASSERT_TRUE(t->put(o, Retention::kBlock).is_ok());
  ASSERT_TRUE(eventually([&] { return t->redis_stats().in_flight == 1; }));  // the writer waits on the server
  server.kill();
  ASSERT_TRUE(t->flush().is_ok());
  RedisStats s = t->redis_stats();
  EXPECT_EQ(s.dropped_puts, chain.all().size());
  EXPECT_EQ(s.queued, 0u);
  EXPECT_FALSE(s.available);
  server.restart();
  ASSERT_TRUE(eventually([&] { return t->redis_stats().available; }));
  put_all(*t, chain.all());
  EXPECT_EQ(server.keys("statebank:*").size(), chain.all().size());
}

TEST(RedisTier, ARestartBetweenCallsCostsNoTrip) {
  RedisServer server;
  auto t = open_redis(options_for(server));
  auto chain = make_chain(9, 2);
  put_all(*t, chain.all());
  // Several connections in the pool: concurrent readers each take one.
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i)
    readers.emplace_back([&] {
      for (int k = 0; k < 20; ++k) {
        ObjectRef got;
        EXPECT_TRUE(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());
      }
    });
  for (auto& r : readers) r.join();
  server.restart();  // the pooled connections are now dead
  ObjectRef got;
  EXPECT_EQ(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).code(), Code::kNotFound);
  EXPECT_TRUE(t->redis_stats().available);
  EXPECT_EQ(t->redis_stats().trips, 0u);
}

TEST(RedisTier, FlushallBetweenTwoReadsIsAMiss) {
  RedisServer server;
  auto t = open_redis(options_for(server));
  auto chain = make_chain(10, 2);
  put_all(*t, chain.all());
  ObjectRef got;
  ASSERT_TRUE(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());
  ASSERT_EQ(server.command({"FLUSHALL"}).str, "OK");
  EXPECT_FALSE(t->contains(ObjectKind::kBlock, chain.blocks[0]->key));
  EXPECT_EQ(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).code(), Code::kNotFound);
  EXPECT_TRUE(t->redis_stats().available);
}

TEST(RedisTier, UnreachableAtOpenServesMissesAndConnectsLater) {
  RedisServer server;
  auto o = options_for(server, milliseconds(300));
  server.kill();
  auto t = open_redis(o);  // opens anyway
  EXPECT_FALSE(t->redis_stats().available);
  ObjectRef got;
  EXPECT_EQ(t->get(ObjectKind::kBlock, Key{1, 1}, &got).code(), Code::kIoError);
  server.restart();
  ASSERT_TRUE(eventually([&] { return t->redis_stats().available; }));
  auto chain = make_chain(11, 1);
  put_all(*t, chain.all());
  ASSERT_TRUE(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());
}

TEST(RedisTier, APasswordIsRequiredAndNeverEchoed) {
  RedisServer server({"--requirepass", "s3cret pass"});
  std::unique_ptr<RedisTier> t;
  auto o = options_for(server);
  Status s = RedisTier::open(o, &t);  // no password given
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("NOAUTH"), std::string::npos) << s.message();
  o.password = "hunter2-xyz";
  s = RedisTier::open(o, &t);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message().find("hunter2"), std::string::npos) << s.message();
  o.password = "s3cret pass";
  t = open_redis(o);
  auto chain = make_chain(12, 1);
  put_all(*t, chain.all());
  ObjectRef got;
  ASSERT_TRUE(t->get(ObjectKind::kBlock, chain.blocks[0]->key, &got).is_ok());
  EXPECT_TRUE(same_object(*chain.blocks[0], *got));
}

TEST(RedisTier, TheUrlSelectsTheDatabase) {
  RedisServer server;
  auto o = options_for(server);
  ASSERT_TRUE(parse_redis_url(server.url(3), &o.address).is_ok());
  auto t = open_redis(o);
  put_all(*t, make_chain(14, 1).all());
  EXPECT_EQ(server.keys("statebank:*", 3).size(), 2u);
  EXPECT_EQ(server.keys("statebank:*", 0).size(), 0u);
}

TEST(RedisTier, ABoundedQueueDropsInsteadOfWaiting) {
  RedisServer server;
  auto o = options_for(server, milliseconds(60000));
  o.queue_max_objects = 2;
  auto t = open_redis(o);
  auto chain = make_chain(13, 4);
  server.pause();
  ASSERT_TRUE(t->put(chain.blocks[0], Retention::kBlock).is_ok());
  ASSERT_TRUE(eventually([&] { return t->redis_stats().in_flight == 1; }));  // the writer holds block 0
  EXPECT_TRUE(t->put(chain.blocks[1], Retention::kBlock).is_ok());
  EXPECT_TRUE(t->put(chain.blocks[2], Retention::kBlock).is_ok());
  EXPECT_EQ(t->put(chain.blocks[3], Retention::kBlock).code(), Code::kResourceExhausted);
  EXPECT_EQ(t->redis_stats().dropped_puts, 1u);
  server.resume();
  ASSERT_TRUE(t->flush().is_ok());
  EXPECT_EQ(server.keys("statebank:blk:*").size(), 3u);
}

// maxmemory with an LRU policy: Redis evicts whatever it likes; a read gives
// the exact object or a miss, nothing else.
TEST(RedisTier, EvictionUnderMaxmemoryLeavesOnlyExactObjectsOrMisses) {
  RedisServer server({"--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"});
  auto t = open_redis(options_for(server));
  std::vector<ObjectRef> all;
  // Publish until Redis has evicted for a while (about 1 MB fits).
  for (int c = 0; c < 2000 && std::stoll("0" + server.info("evicted_keys")) < 200; ++c) {
    auto chain = make_chain(100 + c, 8);
    for (const auto& o : chain.all()) all.push_back(o);
    put_all(*t, chain.all());
  }
  ASSERT_GE(std::stoll(server.info("evicted_keys")), 200);
  std::vector<TierRead> reads = reads_of(all);
  t->get_many(reads);
  size_t hits = 0;
  for (size_t i = 0; i < reads.size(); ++i) {
    if (reads[i].status.is_ok()) {
      ++hits;
      EXPECT_TRUE(same_object(*all[i], *reads[i].object));
    } else {
      EXPECT_EQ(reads[i].status.code(), Code::kNotFound);
    }
  }
  EXPECT_GT(hits, 0u);
  EXPECT_LT(hits, all.size());
  EXPECT_EQ(t->stats().check_failures, 0u);
}

}  // namespace
}  // namespace sb
