// `statebank bank stats|ls|prefixes|verify|gc|flush [--bank-dir DIR]
// [--json]`: inspect, check and clean an SSD bank directory
// (bank/ssd_tier.h), offline.
//
// stats, ls and prefixes open the bank read-only (a shared lock: they are
// refused while a server writes to it). verify, gc and flush open it for
// writing: verify reads every object and quarantines the damaged ones; gc
// removes temporary and quarantined files and, with --budget, evicts in the
// tier's eviction order until the bank fits; flush removes every object
// (--all) or the chains under one root key (--root, as `prefixes` lists
// them: a namespace's K0). Pins live in a server's memory and are not
// stored, so there is nothing to pin offline (docs/bank.md, "Pins"). gc
// also deletes a bank of an older format version in the same directory
// (docs/bank-format.md, "Older and newer versions"), which the other
// actions only report.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bank/bank_factory.h"
#include "bank/format.h"
#include "cli/commands.h"
#include "common/args.h"

namespace sb {
namespace {

const char* kUsage =
    "usage: statebank bank stats|ls|prefixes|verify|gc|flush [--bank-dir DIR] [--json] [--budget SIZE (gc)] "
    "[--limit N (prefixes)] [--all | --root HEX (flush)]";

std::string human(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

nlohmann::json stats_json(const SsdTier& t) {
  SsdStats s = t.ssd_stats();
  return {{"bank_dir", t.dir()},
          {"objects", s.tier.blocks + s.tier.snapshots},
          {"blocks", s.tier.blocks},
          {"snapshots", s.tier.snapshots},
          {"bytes", s.tier.bytes},
          {"budget_bytes", s.tier.budget_bytes},
          {"reserve_bytes", s.reserve_bytes},
          {"block_bytes", s.tier.block_bytes},
          {"snapshot_bytes", s.tier.snapshot_bytes},
          {"quarantine_files", s.quarantine_files},
          {"quarantine_bytes", s.quarantine_bytes},
          {"quarantined_now", s.tier.quarantined},
          {"old_format_files", s.old_format_files},
          {"old_format_bytes", s.old_format_bytes},
          {"temporary_files_removed", s.temp_removed},
          {"temporary_files_left", s.temp_left},
          {"ignored_files", s.ignored_files}};
}

int run_stats(const SsdTier& t, bool json) {
  nlohmann::json j = stats_json(t);
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("bank directory    %s\n", t.dir().c_str());
  std::printf("objects           %llu (%llu blocks, %llu snapshots)\n", (unsigned long long)j["objects"],
              (unsigned long long)j["blocks"], (unsigned long long)j["snapshots"]);
  std::printf("bytes             %llu (%s; blocks %s, snapshots %s)\n", (unsigned long long)j["bytes"],
              human(j["bytes"]).c_str(), human(j["block_bytes"]).c_str(), human(j["snapshot_bytes"]).c_str());
  std::printf("quarantine        %llu files, %llu bytes\n", (unsigned long long)j["quarantine_files"],
              (unsigned long long)j["quarantine_bytes"]);
  std::printf("budget            %llu (%s), free-space reserve %s\n", (unsigned long long)j["budget_bytes"],
              human(j["budget_bytes"]).c_str(), human(j["reserve_bytes"]).c_str());
  std::printf("temporary files   %llu\n", (unsigned long long)j["temporary_files_left"]);
  if (j["old_format_files"] != 0)
    std::printf("older format      %llu files, %llu bytes (a version-1 bank, ignored; gc removes it)\n",
                (unsigned long long)j["old_format_files"], (unsigned long long)j["old_format_bytes"]);
  std::printf("ignored files     %llu (foreign or newer format)\n", (unsigned long long)j["ignored_files"]);
  return 0;
}

nlohmann::json entry_json(const SsdEntry& e) {
  return {{"kind", kind_tag(e.kind)}, {"key", e.key.hex()}, {"bytes", e.bytes},
          {"position", e.position},   {"retention", retention_name(e.retention)}};
}

int run_ls(const SsdTier& t, bool json) {
  auto entries = t.list();
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : entries) arr.push_back(entry_json(e));
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  // Eviction order: the first line is the next victim.
  std::printf("%-8s %-64s %12s %10s %s\n", "kind", "key", "bytes", "position", "retention");
  for (const auto& e : entries)
    std::printf("%-8s %-64s %12llu %10lld %s\n", kind_tag(e.kind), e.key.hex().c_str(),
                (unsigned long long)e.bytes, (long long)e.position, retention_name(e.retention));
  return 0;
}

// Stored chains (Bank::prefixes). A bank holds snapshots only for models
// with recurrent components, so a bank without any is read as one whose
// prefixes need none.
int run_prefixes(const Bank& bank, const SsdTier& t, bool json, size_t limit) {
  const bool needs_snapshot = t.stats().snapshots > 0;
  std::vector<PrefixInfo> all = bank.prefixes(needs_snapshot, 0);
  nlohmann::json arr = nlohmann::json::array();
  for (size_t i = 0; i < all.size() && i < limit; ++i) {
    const PrefixInfo& p = all[i];
    arr.push_back({{"chain", p.tail.hex()},
                   {"root", p.has_root ? nlohmann::json(p.root.hex()) : nlohmann::json(nullptr)},
                   {"tokens", p.tokens},
                   {"restorable_tokens", p.restorable_tokens},
                   {"blocks", p.blocks},
                   {"snapshots", p.snapshots},
                   {"bytes", p.bytes},
                   {"last_use_ms", p.last_use_ms}});
  }
  if (json) {
    std::printf("%s\n", nlohmann::json{{"total", all.size()}, {"prefixes", arr}}.dump(2).c_str());
    return 0;
  }
  // Longest first; a chain without a root has lost a middle block.
  std::printf("%-32s %-32s %9s %11s %7s %10s\n", "chain", "root", "tokens", "restorable", "blocks", "bytes");
  for (const auto& p : arr)
    std::printf("%-32s %-32s %9lld %11lld %7lld %10s\n", p["chain"].get<std::string>().c_str(),
                p["root"].is_null() ? "(hole)" : p["root"].get<std::string>().c_str(), (long long)p["tokens"],
                (long long)p["restorable_tokens"], (long long)p["blocks"], human(p["bytes"]).c_str());
  std::printf("%zu prefixes%s\n", all.size(), all.size() > limit ? (", first " + std::to_string(limit) + " shown").c_str() : "");
  return 0;
}

int run_flush(Bank& bank, bool json, const Key* root) {
  FlushResult r;
  Status s = bank.flush(root, &r);
  if (!s.is_ok()) return fail("bank", "flush: " + s.to_string());
  if (json) {
    std::printf("%s\n", nlohmann::json{{"objects", r.objects}, {"bytes", r.bytes}, {"unattributed_objects", r.unattributed}}
                            .dump(2)
                            .c_str());
  } else {
    std::printf("removed %llu objects (%s)", (unsigned long long)r.objects, human(r.bytes).c_str());
    if (root && r.unattributed)
      std::printf("; %llu objects are cut off from their root and were left", (unsigned long long)r.unattributed);
    std::printf("\n");
  }
  return 0;
}

int run_verify(SsdTier& t, bool json) {
  auto entries = t.list();
  uint64_t ok = 0;
  nlohmann::json failed = nlohmann::json::array();
  // Batches keep memory bounded while reads run in parallel.
  const size_t kBatch = 16;
  for (size_t at = 0; at < entries.size(); at += kBatch) {
    std::vector<TierRead> reads;
    for (size_t i = at; i < std::min(entries.size(), at + kBatch); ++i)
      reads.push_back(TierRead{entries[i].kind, entries[i].key, nullptr, Status()});
    t.get_many(reads);
    for (size_t i = 0; i < reads.size(); ++i) {
      if (reads[i].status.is_ok()) {
        ++ok;
      } else {
        nlohmann::json f = entry_json(entries[at + i]);
        f["error"] = reads[i].status.to_string();
        failed.push_back(f);
      }
    }
  }
  if (json) {
    nlohmann::json j = {{"checked", entries.size()}, {"ok", ok}, {"failed", failed}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& f : failed)
      std::printf("FAILED %s %s: %s\n", f["kind"].get<std::string>().c_str(), f["key"].get<std::string>().c_str(),
                  f["error"].get<std::string>().c_str());
    std::printf("checked %zu objects: %llu ok, %zu failed (moved to quarantine/)\n", entries.size(),
                (unsigned long long)ok, failed.size());
  }
  return failed.empty() ? 0 : 1;
}

int run_gc(SsdTier& t, bool json, bool has_budget, uint64_t budget) {
  uint64_t qfiles = 0, qbytes = 0, evicted = 0, ebytes = 0, ofiles = 0, obytes = 0;
  Status s = t.clear_quarantine(&qfiles, &qbytes);
  if (!s.is_ok()) return fail("bank", "gc: " + s.to_string());
  s = t.remove_old_versions(&ofiles, &obytes);
  if (!s.is_ok()) return fail("bank", "gc: " + s.to_string());
  if (has_budget) {
    s = t.evict_to(budget, &evicted, &ebytes);
    if (!s.is_ok()) return fail("bank", "gc: " + s.to_string());
  }
  SsdStats st = t.ssd_stats();
  if (json) {
    nlohmann::json j = {{"temporary_files_removed", st.temp_removed},
                        {"quarantine_files_removed", qfiles},
                        {"quarantine_bytes_removed", qbytes},
                        {"old_format_files_removed", ofiles},
                        {"old_format_bytes_removed", obytes},
                        {"evicted_objects", evicted},
                        {"evicted_bytes", ebytes},
                        {"objects", st.tier.blocks + st.tier.snapshots},
                        {"bytes", st.tier.bytes}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("removed %llu temporary files, %llu quarantined files (%s)", (unsigned long long)st.temp_removed,
                (unsigned long long)qfiles, human(qbytes).c_str());
    if (ofiles > 0)
      std::printf(", %llu files of an older format (%s)", (unsigned long long)ofiles, human(obytes).c_str());
    if (has_budget)
      std::printf(", evicted %llu objects (%s) to fit %s", (unsigned long long)evicted, human(ebytes).c_str(),
                  human(budget).c_str());
    std::printf("; %llu objects, %s left\n", (unsigned long long)(st.tier.blocks + st.tier.snapshots),
                human(st.tier.bytes).c_str());
  }
  return 0;
}

}  // namespace

int cmd_bank(int argc, char** argv) {
  Args args({"bank-dir", "budget", "limit", "root"}, {"json", "all", "help"});
  Status s = args.parse(argc, argv);
  if (!s.is_ok()) return fail("bank", s.message() + "\n" + kUsage);
  if (args.has("help")) return print_usage(kUsage);
  if (args.positional().size() != 1) return fail("bank", kUsage);
  const std::string action = args.positional()[0];
  if (action != "stats" && action != "ls" && action != "prefixes" && action != "verify" && action != "gc" &&
      action != "flush")
    return fail("bank", "unknown action '" + action + "'\n" + kUsage);
  int64_t limit = 100;
  if (args.has("limit")) {
    if (action != "prefixes") return fail("bank", "--limit only applies to prefixes");
    if (!(s = args.get_int("limit", 100, 1, int64_t{1} << 30, &limit))) return fail("bank", s.message());
  }
  Key root;
  if ((args.has("all") || args.has("root")) && action != "flush") return fail("bank", "--all and --root only apply to flush");
  if (action == "flush") {
    if (args.has("all") == args.has("root")) return fail("bank", "flush needs exactly one of --all and --root HEX");
    if (args.has("root") && !Key::from_hex(args.get("root"), &root))
      return fail("bank", "--root must be 64 hex digits (a root as `statebank bank prefixes` lists it)");
  }
  uint64_t budget = 0;
  const bool has_budget = args.has("budget");
  if (has_budget) {
    if (action != "gc") return fail("bank", "--budget only applies to gc");
    s = args.get_size("budget", 0, &budget);
    if (!s.is_ok()) return fail("bank", s.message());
  }
  BankOptions o;
  o.ssd_dir = args.get("bank-dir", default_bank_dir());
  if (o.ssd_dir.empty()) return fail("bank", "no --bank-dir given and neither XDG_CACHE_HOME nor HOME is set");
  const bool json = args.has("json");
  o.ssd_mode = (action == "stats" || action == "ls" || action == "prefixes") ? SsdMode::kReadOnly : SsdMode::kOn;
  // What the tier found and did (temporary files removed, damage
  // quarantined) goes to stderr; its summary line repeats `stats`.
  o.log = [](const std::string& m) {
    if (m.rfind("opened ", 0) != 0) std::fprintf(stderr, "statebank bank: %s\n", m.c_str());
  };
  if (o.ssd_mode == SsdMode::kOn) {
    // verify, gc and flush clean a bank; they never create one.
    FileInfo info;
    if (!posix_fs()->stat(o.ssd_dir, &info).is_ok() || !info.is_dir)
      return fail("bank", "no bank directory at " + o.ssd_dir);
  }
  std::unique_ptr<TieredBank> bank;
  s = TieredBank::open(std::move(o), &bank);
  if (!s.is_ok()) return fail("bank", s.message());
  SsdTier* t = bank->ssd();
  if (action == "stats") return run_stats(*t, json);
  if (action == "ls") return run_ls(*t, json);
  if (action == "prefixes") return run_prefixes(*bank->bank(), *t, json, static_cast<size_t>(limit));
  if (action == "flush") return run_flush(*bank->bank(), json, args.has("root") ? &root : nullptr);
  if (action == "verify") return run_verify(*t, json);
  return run_gc(*t, json, has_budget, budget);
}

}  // namespace sb
