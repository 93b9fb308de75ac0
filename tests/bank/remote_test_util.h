// Opens the remote tier as the Bank-level tests use it: a test secret,
// block verification, schema checks, a short retry interval, no log lines.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bank/chain.h"
#include "bank/format.h"
#include "bank/remote/redis_tier.h"

namespace sb::testing {

inline std::unique_ptr<RedisTier> open_test_remote(const std::string& url, const std::string& secret,
                                                   const StateSchema& schema, std::chrono::milliseconds timeout,
                                                   std::chrono::seconds ttl = {},
                                                   std::chrono::milliseconds retry_interval = std::chrono::milliseconds(50)) {
  RedisOptions o;
  EXPECT_TRUE(parse_redis_url(url, &o.address).is_ok());
  o.secret = secret;
  o.timeout = timeout;
  o.ttl = ttl;
  o.retry_interval = retry_interval;
  o.schema = schema;
  o.verify_block = [](const Object& b) { return chain_key(b.parent, b.tokens) == b.key; };
  o.log = [](const std::string&) {};
  std::unique_ptr<RedisTier> t;
  Status s = RedisTier::open(std::move(o), &t);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return t;
}

// `block` with its first number changed, encoded with fresh checksums: a
// valid object image that passes every unkeyed check.
inline std::vector<uint8_t> forged_image(const Object& block, const StateSchema& schema) {
  Object forged = block;
  float v;
  std::memcpy(&v, forged.parts[0].data(), 4);
  v += 1.0f;
  std::memcpy(forged.parts[0].data(), &v, 4);
  return encode_object(forged, Retention::kBlock, schema_digest(schema));
}

}  // namespace sb::testing
