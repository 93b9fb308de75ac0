// SSD tier benchmark: restore read throughput against `dd iflag=direct` on the
// same file system in the same run, and bytes on disk for 100 conversations
// that share an 8k-token prefix against the bytes of one.
//
//   ssd_read_bench [--dir DIR] [--gib 1.5] [--threads 1,4,8,16] [--batch 64]
//                  [--snapshot-mib 4] [--no-dedup] [--default-malloc]
//
// Unless --default-malloc is given, the process runs with malloc tuned as
// every statebank process is (common/memory_tuning.h). Both settings print
// CPU seconds and page faults per GiB read.
//
// DIR (default: a new directory under $TMPDIR or /tmp) should be on the file
// system under test; it is removed at the end. The bank is written through the
// tier, closed and reopened (a restart), its files dropped from the page cache,
// then read back with get_many in batches of --batch objects (a restore of
// batch * 256 tokens) with each reader-thread count.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bank/format.h"
#include "bank/ssd_tier.h"
#include "common/args.h"
#include "common/memory_tuning.h"
#include "fs/fs.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fsys = std::filesystem;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

long minor_faults() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// CPU seconds (user + system) this process has used.
double cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "ssd_read_bench: %s\n", m.c_str());
  std::exit(2);
}

void check(const sb::Status& s, const char* what) {
  if (!s.is_ok()) die(std::string(what) + ": " + s.to_string());
}

constexpr int kBlockTokens = 256;

// Rows of a hybrid model with 6 attention layers (k and v, 512 values a
// token each: 24 KiB a token, as in docs/bank.md) and recurrent layers whose
// state totals `snapshot_floats`.
sb::StateSchema bench_schema(uint64_t snapshot_floats) {
  sb::StateSchema s;
  for (int l = 0; l < 6; ++l) {
    s.components.push_back({"layers." + std::to_string(l) + ".k", sb::ComponentKind::kSequence, 1, sb::DType::kF32, 512});
    s.components.push_back({"layers." + std::to_string(l) + ".v", sb::ComponentKind::kSequence, 1, sb::DType::kF32, 512});
  }
  const uint64_t per_layer = snapshot_floats / 18;
  for (int l = 0; l < 18; ++l)
    s.components.push_back({"layers." + std::to_string(l) + ".delta", sb::ComponentKind::kRecurrent, 0, sb::DType::kF32,
                            per_layer});
  return s;
}

void fill(std::vector<float>& v, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (auto& f : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    f = static_cast<float>(static_cast<int32_t>(x >> 40)) * 1e-6f;
  }
}

sb::ObjectRef make_block(const sb::StateSchema& schema, const sb::Key& parent, const sb::Key& key, int64_t position,
                         uint64_t seed) {
  auto o = std::make_shared<sb::Object>();
  o->kind = sb::ObjectKind::kBlock;
  o->key = key;
  o->parent = parent;
  o->position = position;
  for (int t = 0; t < kBlockTokens; ++t) o->tokens.push_back(static_cast<int32_t>((seed * 131 + t) % 151000));
  for (const auto& c : schema.components) {
    if (c.kind == sb::ComponentKind::kRecurrent) continue;
    std::vector<float> part(kBlockTokens * c.row_elems);
    fill(part, seed * 1000 + o->parts.size());
    o->parts.push_back(sb::f32_part(part));
  }
  return o;
}

sb::ObjectRef make_snapshot(const sb::StateSchema& schema, const sb::Key& key, int64_t position, uint64_t seed) {
  auto o = std::make_shared<sb::Object>();
  o->kind = sb::ObjectKind::kSnapshot;
  o->key = key;
  o->position = position;
  for (const auto& c : schema.components) {
    if (c.kind != sb::ComponentKind::kRecurrent) continue;
    std::vector<float> part(c.row_elems);
    fill(part, seed * 1000 + o->parts.size());
    o->parts.push_back(sb::f32_part(part));
  }
  return o;
}

// A key for the benchmark: not a chain key (no model), but as unique.
sb::Key bench_key(uint64_t a, uint64_t b) {
  const uint64_t w[4] = {a * 0x9e3779b97f4a7c15ULL + 17, b * 0xc2b2ae3d27d4eb4fULL + a, a ^ b, 0x5eedULL};
  sb::Key k;
  std::memcpy(k.bytes.data(), w, sizeof w);
  return k;
}

std::unique_ptr<sb::SsdTier> open_bank(const std::string& dir, const sb::StateSchema& schema, int readers) {
  sb::SsdOptions o;
  o.dir = dir;
  o.schema = schema;
  o.reader_threads = readers;
  o.writer_threads = 2;
  o.log = [](const std::string&) {};
  std::unique_ptr<sb::SsdTier> t;
  check(sb::SsdTier::open(o, &t), "open bank");
  return t;
}

uint64_t disk_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : fsys::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

void drop_cache(const std::string& dir) {
  for (const auto& e : fsys::recursive_directory_iterator(dir))
    if (e.is_regular_file()) (void)sb::posix_fs()->drop_cache(e.path().string());
}

// Runs dd and returns bytes per second parsed from its summary line.
double run_dd(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) die("cannot run " + cmd);
  char line[512];
  double bytes = 0, secs = 0;
  while (std::fgets(line, sizeof(line), p)) {
    std::string l = line;
    auto copied = l.find(" copied, ");
    if (copied == std::string::npos) continue;
    bytes = std::strtod(l.c_str(), nullptr);
    secs = std::strtod(l.c_str() + copied + 9, nullptr);
  }
  int rc = pclose(p);
  if (rc != 0 || bytes <= 0 || secs <= 0) die("dd failed or printed no summary: " + cmd);
  return bytes / secs;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  size_t at = 0;
  while (at <= s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    v.push_back(std::atoi(s.substr(at, comma - at).c_str()));
    at = comma + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  sb::Args args({"dir", "gib", "threads", "batch", "snapshot-mib"}, {"no-dedup", "default-malloc"});
  double gib = 0, snapshot_mib = 0;
  int64_t batch64 = 0;
  check(args.parse(argc, argv), "arguments");
  check(args.get_double("gib", 1.5, &gib), "--gib");
  check(args.get_int("batch", 64, 1, 1 << 20, &batch64), "--batch");
  check(args.get_double("snapshot-mib", 4, &snapshot_mib), "--snapshot-mib");
  const std::string dir_arg = args.get("dir");
  const std::vector<int> threads = parse_list(args.get("threads", "1,4,8,16"));
  const int batch = static_cast<int>(batch64);
  const bool dedup = !args.has("no-dedup");
  const bool tune_malloc = !args.has("default-malloc");
  if (gib <= 0 || snapshot_mib <= 0) die("--gib and --snapshot-mib must be positive");
  if (tune_malloc) sb::tune_memory(argv);
  std::string root = dir_arg;
  if (root.empty()) {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/sb_ssd_bench_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) die("cannot create a directory under " + tmpl);
    root = buf.data();
  } else {
    fsys::create_directories(root);
  }
  const std::string bank_dir = root + "/bank";
  const sb::StateSchema schema = bench_schema(static_cast<uint64_t>(snapshot_mib * 1024 * 1024 / 4));
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::printf("ssd_read_bench: directory %s, malloc %s (GLIBC_TUNABLES=%s)\n", root.c_str(),
              tune_malloc ? "tuned: freed memory kept in the heap" : "glibc defaults", tunables ? tunables : "");
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    char load[128] = {0};
    if (std::fgets(load, sizeof(load), f)) std::printf("load average at start: %s", load);
    std::fclose(f);
  }

  // 1. Write a bank of block objects through the tier.
  const uint64_t block_bytes = sb::encoded_size(*make_block(schema, {}, {}, 0, 0));
  const int n_blocks = static_cast<int>(gib * (1ull << 30) / static_cast<double>(block_bytes));
  std::vector<sb::Key> keys;
  {
    auto t = open_bank(bank_dir, schema, 1);
    auto start = Clock::now();
    sb::Key parent{};
    for (int b = 0; b < n_blocks; ++b) {
      sb::Key key = bench_key(1, static_cast<uint64_t>(b));
      auto o = make_block(schema, parent, key, int64_t(b) * kBlockTokens, static_cast<uint64_t>(b));
      while (t->put(o, sb::Retention::kBlock).code() == sb::Code::kResourceExhausted) {
      }
      keys.push_back(key);
      parent = key;
    }
    check(t->flush(), "write bank");
    double s = seconds_since(start);
    std::printf("write: %d blocks of %.2f MiB (%.2f GiB) in %.2f s: %.2f GB/s (generate + encode + write + fsync)\n",
                n_blocks, block_bytes / 1048576.0, double(n_blocks) * block_bytes / (1ull << 30), s,
                double(n_blocks) * block_bytes / s / 1e9);
  }
  const double total = double(n_blocks) * double(block_bytes);

  // 2. dd's file of the same size on the same file system; dd reads it
  // before and after the tier's reads (the disk is shared: the mean of the
  // two is the reference).
  const std::string dd_file = root + "/dd.bin";
  const uint64_t mib = static_cast<uint64_t>(total / 1048576.0) + 1;
  run_dd("dd if=/dev/zero of=" + dd_file + " bs=1M count=" + std::to_string(mib) + " oflag=direct conv=fsync");
  const std::string dd_read = "dd if=" + dd_file + " of=/dev/null bs=4M iflag=direct";
  (void)sb::posix_fs()->drop_cache(dd_file);
  const double dd_before = run_dd(dd_read);

  // 3. Reopen (restart) and read back with each reader-thread count.
  double best = 0;
  int best_threads = 0;
  for (int th : threads) {
    drop_cache(bank_dir);
    auto start_open = Clock::now();
    auto t = open_bank(bank_dir, schema, th);
    double open_s = seconds_since(start_open);
    auto start = Clock::now();
    const double cpu0 = cpu_seconds();
    const long faults0 = minor_faults();
    uint64_t failures = 0;
    for (size_t at = 0; at < keys.size(); at += static_cast<size_t>(batch)) {
      std::vector<sb::TierRead> reads;
      for (size_t i = at; i < std::min(keys.size(), at + static_cast<size_t>(batch)); ++i)
        reads.push_back(sb::TierRead{sb::ObjectKind::kBlock, keys[i], nullptr, sb::Status()});
      t->get_many(reads);
      for (const auto& r : reads) failures += r.status.is_ok() ? 0 : 1;
    }
    double s = seconds_since(start);
    const double cpu = cpu_seconds() - cpu0;
    const long faults = minor_faults() - faults0;
    if (failures) die(std::to_string(failures) + " reads failed");
    double rate = total / s;
    std::printf(
        "read:  %2d reader threads: %.2f GiB in %.2f s: %.2f GB/s, %.2f CPU s and %.0f page faults per GiB (reopen "
        "%.3f s, %zu objects)\n",
        th, total / (1ull << 30), s, rate / 1e9, cpu / (total / (1ull << 30)), faults / (total / (1ull << 30)), open_s,
        keys.size());
    if (rate > best) {
      best = rate;
      best_threads = th;
    }
  }
  (void)sb::posix_fs()->drop_cache(dd_file);
  const double dd_after = run_dd(dd_read);
  fsys::remove(dd_file);
  const double dd = (dd_before + dd_after) / 2;
  std::printf("dd iflag=direct bs=4M: %.2f GB/s before, %.2f GB/s after the tier's reads\n", dd_before / 1e9,
              dd_after / 1e9);
  std::printf("restore read ratio (best tier / mean dd): %.2f (%d reader threads)\n", best / dd, best_threads);
  fsys::remove_all(bank_dir);

  // 4. Dedup: 100 conversations sharing an 8192-token prefix, each with one
  // block of its own and a snapshot at its own end, plus the shared snapshot
  // at the end of the prefix.
  if (dedup) {
    const int kPrefixBlocks = 8192 / kBlockTokens, kConversations = 100;
    // The prefix's objects are the same for every conversation (same keys,
    // same bytes), so they are made once and put again for each.
    std::vector<sb::ObjectRef> prefix;
    sb::Key parent{};
    for (int b = 0; b < kPrefixBlocks; ++b) {
      sb::Key key = bench_key(2, static_cast<uint64_t>(b));
      prefix.push_back(make_block(schema, parent, key, int64_t(b) * kBlockTokens, 500000 + static_cast<uint64_t>(b)));
      parent = key;
    }
    const sb::Key prefix_end = parent;
    auto shared_snap = make_snapshot(schema, prefix_end, 8192, 777);
    auto put = [](sb::SsdTier& t, const sb::ObjectRef& o, sb::Retention retention) {
      while (t.put(o, retention).code() == sb::Code::kResourceExhausted) {
      }
    };
    auto write_conversations = [&](const std::string& dir, int n) {
      auto t = open_bank(dir, schema, 1);
      for (int c = 0; c < n; ++c) {
        for (const auto& o : prefix) put(*t, o, sb::Retention::kBlock);
        put(*t, shared_snap, sb::Retention::kAnchor);
        sb::Key own = bench_key(3, static_cast<uint64_t>(c));
        put(*t, make_block(schema, prefix_end, own, 8192, 900000 + static_cast<uint64_t>(c)), sb::Retention::kBlock);
        put(*t, make_snapshot(schema, own, 8192 + kBlockTokens, 1000 + static_cast<uint64_t>(c)),
            sb::Retention::kKeep);
      }
      check(t->flush(), "write conversations");
    };
    const std::string one = root + "/one", many = root + "/many";
    write_conversations(one, 1);
    write_conversations(many, kConversations);
    const double b1 = double(disk_bytes(one)), b100 = double(disk_bytes(many));
    std::printf(
        "dedup: 1 conversation (8192 shared + 256 own tokens, %.1f MiB snapshots): %.1f MiB; %d conversations: %.1f "
        "MiB; ratio %.2f (without dedup: %d.00)\n",
        snapshot_mib, b1 / 1048576, kConversations, b100 / 1048576, b100 / b1, kConversations);
    fsys::remove_all(one);
    fsys::remove_all(many);
  }
  if (dir_arg.empty()) fsys::remove_all(root);
  return 0;
}
