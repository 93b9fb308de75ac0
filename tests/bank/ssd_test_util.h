// Helpers for the SSD tier's tests (directories: tests/util/temp_dir.h): deterministic
// objects of a small schema with real chain keys, and exact comparison.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bank/format.h"
#include "bank/key.h"
#include "bank/ssd_tier.h"
#include "tests/bank/test_keys.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {

constexpr int32_t kTestBlockTokens = 16;

inline StateSchema ssd_test_schema() {
  StateSchema s;
  s.components.push_back({"layers.0.attn.k", ComponentKind::kSequence, 1, DType::kF32, 8});
  s.components.push_back({"layers.0.delta", ComponentKind::kRecurrent, 0, DType::kF32, 40});
  s.components.push_back({"layers.1.pooled", ComponentKind::kPooled, 4, DType::kF32, 3});
  s.components.push_back({"layers.1.conv", ComponentKind::kRecurrent, 0, DType::kF32, 6});
  return s;
}

// Temporary files (".tmp-" in the name) anywhere under a bank directory: a
// writer's leftovers, which a clean run or a recovery leaves none of.
inline size_t count_temporary_files(const std::string& bank) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(bank, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename().string().find(".tmp-") != std::string::npos) ++n;
  return n;
}

// The chain of `n_blocks` blocks for a conversation seeded by `seed`, with a
// snapshot at every block boundary. Values depend on seed and position so
// that any two objects differ.
struct TestChain {
  std::vector<ObjectRef> blocks, snapshots;
  std::vector<ObjectRef> all() const {
    std::vector<ObjectRef> v = blocks;
    v.insert(v.end(), snapshots.begin(), snapshots.end());
    return v;
  }
};

inline TestChain make_chain(uint64_t seed, int n_blocks, const StateSchema& schema = ssd_test_schema()) {
  TestChain c;
  std::mt19937_64 rng(seed);
  Key k = root_key(kBankFormatVersion, "ssd-test-model", "ns" + std::to_string(seed % 3), kTestBlockTokens);
  for (int b = 0; b < n_blocks; ++b) {
    auto o = std::make_shared<Object>();
    o->kind = ObjectKind::kBlock;
    o->parent = k;
    o->position = int64_t(b) * kTestBlockTokens;
    for (int t = 0; t < kTestBlockTokens; ++t) o->tokens.push_back(static_cast<int32_t>(rng() % 150000));
    o->key = chain_key(k, o->tokens);
    for (const auto& comp : schema.components) {
      if (comp.kind == ComponentKind::kRecurrent) continue;
      uint64_t n = (comp.rows_at(o->position + kTestBlockTokens) - comp.rows_at(o->position)) * comp.row_elems;
      std::vector<float> part(n);
      for (auto& v : part) v = static_cast<float>(static_cast<int64_t>(rng() % 2000001) - 1000000) * 1e-3f;
      o->parts.push_back(f32_part(part));
    }
    k = o->key;
    c.blocks.push_back(o);
    auto s = std::make_shared<Object>();
    s->kind = ObjectKind::kSnapshot;
    s->key = k;
    s->position = int64_t(b + 1) * kTestBlockTokens;
    for (const auto& comp : schema.components) {
      if (comp.kind != ComponentKind::kRecurrent) continue;
      std::vector<float> part(comp.row_elems);
      for (auto& v : part) v = static_cast<float>(rng() % 100000) * 0.25f;
      s->parts.push_back(f32_part(part));
    }
    c.snapshots.push_back(s);
  }
  return c;
}

inline bool same_object(const Object& a, const Object& b) {
  if (a.kind != b.kind || a.dtype != b.dtype || a.key != b.key || a.parent != b.parent || a.position != b.position || a.tokens != b.tokens ||
      a.parts.size() != b.parts.size())
    return false;
  for (size_t i = 0; i < a.parts.size(); ++i) {
    if (a.parts[i].size() != b.parts[i].size()) return false;
    if (!a.parts[i].empty() && std::memcmp(a.parts[i].data(), b.parts[i].data(), a.parts[i].size()) != 0)
      return false;
  }
  return true;
}

inline SsdOptions test_options(const std::string& dir, Fs* fs = nullptr) {
  SsdOptions o;
  o.dir = dir;
  o.fs = fs;
  o.schema = ssd_test_schema();
  o.verify_block = block_key_matches;
  o.reader_threads = 2;
  o.log = [](const std::string&) {};  // tests assert on stats, not on log lines
  return o;
}

inline std::unique_ptr<SsdTier> open_tier(SsdOptions o) {
  std::unique_ptr<SsdTier> t;
  Status s = SsdTier::open(std::move(o), &t);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return t;
}

inline size_t count_files(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); it != std::filesystem::recursive_directory_iterator();
       ++it)
    if (it->is_regular_file()) ++n;
  return n;
}

}  // namespace sb::testing
