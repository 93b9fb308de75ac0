#include "bench/agent_workload.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "bank/bank_factory.h"
#include "bank/chain.h"
#include "bank/key.h"
#include "engine/engine.h"
#include "model/model.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Ids below the first special token of the Qwen vocabularies, so a random
// prompt never holds a control token.
constexpr int32_t kPlainVocab = 151643;

// A deterministic stream of ids: the same (seed, stream) gives the same ids.
std::vector<int32_t> random_tokens(uint64_t seed, uint64_t stream, int64_t n, int32_t limit) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  const uint64_t base = mix64(seed ^ mix64(stream));
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = static_cast<int32_t>(mix64(base + static_cast<uint64_t>(i)) % static_cast<uint64_t>(limit));
  return out;
}

constexpr uint64_t kPrefixStream = 1;
uint64_t project_stream(int p) { return 1000 + static_cast<uint64_t>(p); }
uint64_t message_stream(int p, int t) { return 1000000 + static_cast<uint64_t>(p) * 10000 + static_cast<uint64_t>(t); }

uint64_t dir_bytes(const std::string& dir, uint64_t* files) {
  uint64_t total = 0, n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2)) {
      const auto size = it->file_size(e2);
      if (!e2) {
        total += size;
        ++n;
      }
    }
  }
  if (files) *files = n;
  return total;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Empty when equal, else where the first difference is.
std::string compare_results(const CompletionResult& a, const CompletionResult& b) {
  if (a.tokens.size() != b.tokens.size())
    return "generated " + std::to_string(a.tokens.size()) + " tokens, bypass " + std::to_string(b.tokens.size());
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    const GeneratedToken &x = a.tokens[i], &y = b.tokens[i];
    if (x.token != y.token)
      return "token " + std::to_string(i) + ": " + std::to_string(x.token) + " vs bypass " + std::to_string(y.token);
    if (!same_bits(x.logprob, y.logprob)) return "logprob bits of token " + std::to_string(i) + " differ";
    if (x.top.size() != y.top.size()) return "top_logprobs count of token " + std::to_string(i) + " differs";
    for (size_t j = 0; j < x.top.size(); ++j)
      if (x.top[j].token != y.top[j].token || !same_bits(x.top[j].logprob, y.top[j].logprob))
        return "top_logprobs " + std::to_string(j) + " of token " + std::to_string(i) + " differ";
  }
  if (a.finish_reason != b.finish_reason) return std::string("finish_reason ") + finish_reason_name(a.finish_reason) + " vs bypass " + finish_reason_name(b.finish_reason);
  return "";
}

AgentRow row_of(const CompletionResult& r, double total_ms) {
  AgentRow row;
  row.served = r.restore.mode.name();
  row.ttft_ms = r.ttft_ms;
  row.total_ms = total_ms;
  row.restore_point = r.restore.restore_point;
  row.snapshot_position = r.restore.snapshot_position;
  row.prefill_tokens = r.restore.prefill_tokens;
  row.blocks = r.restore.blocks;
  row.bytes_read = r.restore.bytes_read;
  row.lookup_ms = r.restore.lookup_ms;
  row.restore_ms = r.restore.restore_ms;
  row.prefill_ms = r.restore.prefill_ms;
  row.generated = static_cast<int64_t>(r.tokens.size());
  for (const auto& g : r.tokens) row.tokens.push_back(g.token);
  return row;
}

Status write_scratch_file(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error("cannot create " + path + ": " + std::strerror(errno));
  std::vector<uint64_t> buf((4u << 20) / sizeof(uint64_t));
  uint64_t done = 0, counter = 0;
  Status s;
  while (done < bytes && s.is_ok()) {
    // Incompressible content, in case the file system compresses.
    for (auto& w : buf) w = mix64(++counter);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes - done, buf.size() * sizeof(uint64_t)));
    const char* p = reinterpret_cast<const char*>(buf.data());
    size_t off = 0;
    while (off < n) {
      const ssize_t w = ::write(fd, p + off, n - off);
      if (w < 0) {
        if (errno == EINTR) continue;
        s = Status::io_error("writing " + path + ": " + std::strerror(errno));
        break;
      }
      off += static_cast<size_t>(w);
    }
    done += off;
  }
  if (s.is_ok() && ::fsync(fd) != 0) s = Status::io_error("fsync " + path + ": " + std::strerror(errno));
  ::close(fd);
  return s;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// Runs `command` in a shell and returns its stdout and stderr together.
Status run_capture(const std::string& command, std::string* output, int* exit_code) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return Status::io_error("cannot run: " + command);
  std::array<char, 4096> buf;
  output->clear();
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) output->append(buf.data(), n);
  const int st = ::pclose(p);
  *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return Status::ok();
}

// Parses dd's summary line: "N bytes (...) copied, S s, R GB/s".
bool parse_dd(const std::string& text, uint64_t* bytes, double* seconds) {
  const auto at = text.rfind(" bytes");
  if (at == std::string::npos) return false;
  auto start = text.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  char* end = nullptr;
  const unsigned long long b = std::strtoull(text.c_str() + start, &end, 10);
  if (end != text.c_str() + at) return false;
  const auto copied = text.find("copied, ", at);
  if (copied == std::string::npos) return false;
  const char* s = text.c_str() + copied + 8;
  const double sec = std::strtod(s, &end);
  if (end == s || std::strncmp(end, " s", 2) != 0) return false;
  *bytes = b;
  *seconds = sec;
  return true;
}

struct Bench {
  Bench(const Model& m, const AgentWorkloadOptions& options, AgentResult* r) : model(m), o(options), result(r) {}

  const Model& model;
  const AgentWorkloadOptions& o;
  AgentResult* result;

  std::unique_ptr<TieredBank> tiers;  // RAM over SSD (none on the replica), over Redis with a remote
  SsdTier* ssd = nullptr;             // tiers->ssd()
  RedisTier* remote = nullptr;        // tiers->remote()
  std::string remote_prefix;
  std::string remote_secret;  // this run's MAC key for its Redis values
  std::unique_ptr<Engine> engine;

  // For the ideal and naive byte counts.
  Key root;
  std::set<Key> blocks_seen;
  std::set<Key> restored_snapshots;
  std::vector<Key> last_prompt_end;  // per project; zero key: none yet
  std::vector<bool> has_prompt_end;
  std::set<Key> needed;  // snapshots the ideal counts

  void say(const std::string& line) const {
    if (o.progress) o.progress(line);
  }

  Status open_bank(bool with_ssd = true) {
    BankOptions bo;
    bo.ram_bytes = o.ram_bytes;
    bo.ssd_mode = with_ssd ? SsdMode::kOn : SsdMode::kOff;
    bo.ssd_dir = o.bank_dir;
    bo.schema = model.schema();
    bo.log = [this](const std::string& m) { say("bank: " + m); };
    bo.remote = o.remote_url;
    bo.remote_password = o.remote_password;
    bo.remote_secret = remote_secret;
    bo.remote_timeout = o.remote_timeout;
    bo.remote_ttl = std::chrono::seconds(3600);
    bo.remote_key_prefix = remote_prefix;
    SB_RETURN_IF_ERROR(TieredBank::open(std::move(bo), &tiers));
    ssd = tiers->ssd();
    remote = tiers->remote();
    if (remote && !remote->redis_stats().available)
      return Status::io_error("the remote tier at " + o.remote_url + " does not answer");
    EngineOptions eo;
    eo.block_tokens = o.block_tokens;
    eo.snapshot_every = o.snapshot_every;
    SB_RETURN_IF_ERROR(Engine::create(model, tiers->bank(), eo, &engine));
    if (o.on_engine) o.on_engine(*engine);
    return Status::ok();
  }

  // Waits for the tiers' background writes (outside every timed region).
  Status flush_writes() { return tiers->flush(); }

  // The restart: what a server process exit and start does to the bank.
  // With `replica`, a second server instead: nothing local, the same Redis.
  Status restart(bool replica = false) {
    SB_RETURN_IF_ERROR(flush_writes());
    count_losses();
    close_bank();
    return open_bank(!replica);
  }

  void close_bank() {
    engine.reset();
    ssd = nullptr;
    remote = nullptr;
    tiers.reset();
  }

  void count_losses() {
    if (ssd) {
      const SsdStats st = ssd->ssd_stats();
      result->ssd_dropped_puts += st.dropped_puts;
      result->ssd_write_errors += st.write_errors;
    }
    if (remote) {
      const RedisStats st = remote->redis_stats();
      result->remote_wire_received += st.wire_bytes_received;
      result->remote_wire_sent += st.wire_bytes_sent;
      result->remote_dropped_puts += st.dropped_puts;
      result->remote_write_errors += st.write_errors;
      result->remote_check_failures += st.tier.check_failures;
    }
  }

  void account(const std::vector<int32_t>& prompt, int project, const RestoreRecord& rec, AgentRow* row) {
    const int64_t B = o.block_tokens;
    const int64_t n_blocks = static_cast<int64_t>(prompt.size()) / B;
    const auto keys = chain_keys(root, prompt, o.block_tokens, n_blocks);
    for (int64_t k = 1; k <= n_blocks; ++k) blocks_seen.insert(keys[static_cast<size_t>(k)]);
    const bool recurrent = model.schema().has_recurrent();
    if (recurrent && rec.restore_point > 0) restored_snapshots.insert(keys[static_cast<size_t>(rec.restore_point / B)]);
    if (n_blocks > 0) {
      last_prompt_end[static_cast<size_t>(project)] = keys[static_cast<size_t>(n_blocks)];
      has_prompt_end[static_cast<size_t>(project)] = true;
      result->naive_bytes += static_cast<uint64_t>(n_blocks) * result->block_state_bytes +
                             (recurrent ? result->snapshot_state_bytes : 0);
    }
    needed = restored_snapshots;
    if (recurrent)
      for (size_t p = 0; p < last_prompt_end.size(); ++p)
        if (has_prompt_end[p]) needed.insert(last_prompt_end[p]);
    result->distinct_blocks = blocks_seen.size();
    result->needed_snapshots = needed.size();
    result->ideal_bytes =
        blocks_seen.size() * result->block_state_bytes + needed.size() * result->snapshot_state_bytes;
    row->naive_bytes = result->naive_bytes;
    row->ideal_bytes = result->ideal_bytes;
  }

  Status run_pair(int request, const char* phase, int turn, int project, const std::vector<int32_t>& prompt,
                  int64_t message_boundary, std::vector<int32_t>* reply) {
    CompletionRequest req;
    req.prompt = prompt;
    req.max_tokens = o.reply_tokens;
    req.top_logprobs = o.top_logprobs;
    req.message_boundary = message_boundary;
    CompletionResult warm, cold;

    req.cache_mode = CacheMode::kDefault;
    const RedisStats wire_before = remote ? remote->redis_stats() : RedisStats();
    auto t0 = Clock::now();
    SB_RETURN_IF_ERROR(engine->complete(req, &warm));
    const double warm_total = ms_since(t0);
    // Outside the timed region: the writes of this request are on disk
    // (and in Redis) before anything else runs.
    SB_RETURN_IF_ERROR(flush_writes());
    const RedisStats wire_after = remote ? remote->redis_stats() : RedisStats();

    req.cache_mode = CacheMode::kBypass;
    t0 = Clock::now();
    SB_RETURN_IF_ERROR(engine->complete(req, &cold));
    const double cold_total = ms_since(t0);

    AgentRow w = row_of(warm, warm_total), c = row_of(cold, cold_total);
    for (AgentRow* r : {&w, &c}) {
      r->request = request;
      r->phase = phase;
      r->turn = turn;
      r->project = project;
      r->prompt_tokens = static_cast<int64_t>(prompt.size());
      r->message_boundary = message_boundary;
    }
    w.mode = "bank";
    c.mode = "bypass";
    w.wire_received = wire_after.wire_bytes_received - wire_before.wire_bytes_received;
    w.wire_sent = wire_after.wire_bytes_sent - wire_before.wire_bytes_sent;
    w.ttft_ratio = c.ttft_ms > 0 ? w.ttft_ms / c.ttft_ms : 0;
    const std::string diff = compare_results(warm, cold);
    w.equal_to_bypass = diff.empty();
    if (!diff.empty()) {
      std::ostringstream m;
      m << "request " << request << " (" << phase << " restart, turn " << turn << ", project " << project
        << ", served " << w.served << ", restore_point " << w.restore_point << "): " << diff;
      result->mismatches.push_back(m.str());
      say("MISMATCH: " + m.str());
    }
    w.disk_bytes = dir_bytes(o.bank_dir, nullptr);
    // The byte accounting describes the first server's SSD tier; the replica has none.
    if (ssd) account(prompt, project, warm.restore, &w);

    char line[512];
    std::snprintf(line, sizeof line,
                  "request %d (%s restart, turn %d, project %d, %lld tokens): bank %s ttft %.1f ms (restore_point "
                  "%lld, prefill %lld), bypass ttft %.1f ms, ratio %.3f, %s",
                  request, phase, turn, project, static_cast<long long>(prompt.size()), w.served.c_str(), w.ttft_ms,
                  static_cast<long long>(w.restore_point), static_cast<long long>(w.prefill_tokens), c.ttft_ms,
                  w.ttft_ratio, w.equal_to_bypass ? "equal" : "DIFFERENT");
    say(line);
    *reply = c.tokens;
    result->rows.push_back(std::move(w));
    result->rows.push_back(std::move(c));
    return Status::ok();
  }

  // The SSD tier's contents against the ideal (after its writes are done).
  Status take_disk_figures() {
    SB_RETURN_IF_ERROR(ssd->flush());
    const SsdStats st = ssd->ssd_stats();
    result->ssd_blocks = st.tier.blocks;
    result->ssd_snapshots = st.tier.snapshots;
    result->disk_bytes = dir_bytes(o.bank_dir, &result->disk_files);
    result->unused_snapshots = result->unused_snapshot_bytes = 0;
    for (const SsdEntry& e : ssd->list()) {
      if (e.kind == ObjectKind::kSnapshot && !needed.count(e.key)) {
        ++result->unused_snapshots;
        result->unused_snapshot_bytes += result->snapshot_state_bytes;
      }
    }
    result->other_disk_bytes = static_cast<int64_t>(result->disk_bytes) -
                               static_cast<int64_t>(result->ideal_bytes + result->unused_snapshot_bytes);
    return Status::ok();
  }

  // An empty bank directory, and (with a remote tier) this run's own key
  // prefix and secret.
  Status prepare_bank_dir() {
    std::error_code ec;
    if (std::filesystem::exists(o.bank_dir, ec) && !std::filesystem::is_empty(o.bank_dir, ec))
      return Status::invalid("bank directory " + o.bank_dir + " is not empty; the benchmark starts from an empty bank");
    std::filesystem::create_directories(o.bank_dir, ec);
    if (ec) return Status::io_error("cannot create " + o.bank_dir + ": " + ec.message());
    // This run's own names in Redis: nothing another run left is restored.
    remote_prefix = "statebank-bench-" + std::to_string(::getpid()) + "-" +
                    std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + ":";
    result->remote = !o.remote_url.empty();
    // Only this run's banks share these names: a secret of its own, from the
    // OS's random source (the remote tier authenticates every value with it).
    if (result->remote) {
      std::random_device rd;
      remote_secret.clear();
      for (int i = 0; i < 8; ++i) {
        char part[9];
        std::snprintf(part, sizeof part, "%08x", static_cast<unsigned>(rd()));
        remote_secret += part;
      }
    }
    return Status::ok();
  }

  // Touches every weight once so the first measured request does not pay
  // for page faults its bypass twin would not.
  Status warm_up(int32_t limit) {
    CompletionRequest warmup;
    warmup.prompt = random_tokens(o.seed, 7, std::min<int64_t>(64, std::max<int64_t>(1, o.prefix_tokens)), limit);
    warmup.max_tokens = 2;
    warmup.cache_mode = CacheMode::kBypass;
    CompletionResult ignored;
    SB_RETURN_IF_ERROR(engine->complete(warmup, &ignored));
    return Status::ok();
  }

  // Every turn of every project: before the restart, after it, and on the
  // replica.
  Status run_turns(int32_t limit, std::vector<std::vector<int32_t>>* conversation) {
    int request = 0;
    const int replica_turns = o.remote_url.empty() ? 0 : o.turns_after;
    const int total_turns = o.turns + o.turns_after + replica_turns;
    for (int t = 0; t < total_turns; ++t) {
      if (t == o.turns) {
        say("restart: flushing the SSD queue, destroying the engine, bank and tiers, reopening " + o.bank_dir);
        SB_RETURN_IF_ERROR(restart());
        const SsdStats st = ssd->ssd_stats();
        say("reopened: " + std::to_string(st.tier.blocks) + " blocks, " + std::to_string(st.tier.snapshots) +
            " snapshots on disk; RAM tier empty");
      }
      if (replica_turns > 0 && t == o.turns + o.turns_after) {
        // The disk figures below describe the first server's SSD tier: take them now.
        SB_RETURN_IF_ERROR(take_disk_figures());
        say("replica: a fresh engine with an empty RAM tier and no SSD tier, on the same Redis");
        SB_RETURN_IF_ERROR(restart(true));
      }
      const char* phase = t < o.turns ? "before" : t < o.turns + o.turns_after ? "after" : "replica";
      for (int p = 0; p < o.projects; ++p) {
        auto& c = (*conversation)[static_cast<size_t>(p)];
        const auto boundary = static_cast<int64_t>(c.size());
        const auto message = random_tokens(o.seed, message_stream(p, t), o.message_tokens, limit);
        c.insert(c.end(), message.begin(), message.end());
        std::vector<int32_t> reply;
        SB_RETURN_IF_ERROR(run_pair(++request, phase, t, p, c, boundary, &reply));
        c.insert(c.end(), reply.begin(), reply.end());
      }
    }
    return Status::ok();
  }

  // dd reading a scratch file as large as the largest SSD restore: the
  // baseline for the restore's read throughput.
  void dd_baseline() {
    if (!o.dd_file.empty()) {
      // A file as large as the largest read of a request served from the SSD
      // tier alone, rounded up to dd's 4 MiB block.
      uint64_t want = 0;
      for (const auto& r : result->rows)
        if (r.mode == "bank" && r.served == "ssd") want = std::max(want, r.bytes_read);
      constexpr uint64_t kBlock = 4ull << 20;
      want = std::max<uint64_t>(kBlock, (want + kBlock - 1) / kBlock * kBlock);
      say("dd baseline: writing " + std::to_string(want >> 20) + " MiB to " + o.dd_file);
      Status s = write_scratch_file(o.dd_file, want);
      if (s.is_ok())
        s = dd_read(o.dd_file, &result->dd_command, &result->dd_direct, &result->dd_bytes, &result->dd_seconds,
                    &result->dd_note);
      std::error_code ec;
      std::filesystem::remove(o.dd_file, ec);
      if (s.is_ok()) {
        result->dd_ran = true;
      } else {
        result->dd_note = s.to_string();
        say("dd baseline failed: " + s.to_string());
      }
    } else {
      result->dd_note = "not measured (no scratch file given)";
    }
  }

  Status run() {
    const auto t_start = Clock::now();
    const StateSchema& schema = model.schema();
    const int64_t B = o.block_tokens;
    result->block_state_bytes = schema.block_bytes(B) + static_cast<uint64_t>(B) * sizeof(int32_t);
    result->snapshot_state_bytes = schema.has_recurrent() ? schema.snapshot_bytes() : 0;
    root = root_key(kBankFormatVersion, model.fingerprint(), "", o.block_tokens);
    last_prompt_end.assign(static_cast<size_t>(o.projects), Key{});
    has_prompt_end.assign(static_cast<size_t>(o.projects), false);

    SB_RETURN_IF_ERROR(prepare_bank_dir());
    SB_RETURN_IF_ERROR(open_bank());

    const int32_t limit = static_cast<int32_t>(std::min<int64_t>(model.vocab_size(), kPlainVocab));
    const std::vector<int32_t> prefix = random_tokens(o.seed, kPrefixStream, o.prefix_tokens, limit);
    // conversation[p]: the prompt of the last turn plus its reply.
    std::vector<std::vector<int32_t>> conversation(static_cast<size_t>(o.projects));
    for (int p = 0; p < o.projects; ++p) {
      auto& c = conversation[static_cast<size_t>(p)];
      c = prefix;
      const auto data = random_tokens(o.seed, project_stream(p), o.project_tokens, limit);
      c.insert(c.end(), data.begin(), data.end());
    }

    SB_RETURN_IF_ERROR(warm_up(limit));
    SB_RETURN_IF_ERROR(run_turns(limit, &conversation));
    if (ssd) SB_RETURN_IF_ERROR(take_disk_figures());
    SB_RETURN_IF_ERROR(flush_writes());
    count_losses();
    close_bank();

    dd_baseline();
    result->wall_seconds = ms_since(t_start) / 1000.0;
    return Status::ok();
  }
};

}  // namespace

Status dd_read(const std::string& file, std::string* command, bool* direct, uint64_t* bytes, double* seconds,
               std::string* note) {
  for (const bool want_direct : {true, false}) {
    const std::string cmd = "LC_ALL=C dd if=" + shell_quote(file) + " of=/dev/null bs=4M" +
                            (want_direct ? " iflag=direct" : "");
    std::string output;
    int code = 0;
    SB_RETURN_IF_ERROR(run_capture(cmd, &output, &code));
    if (code == 0) {
      if (!parse_dd(output, bytes, seconds) || *seconds <= 0)
        return Status::internal("cannot parse dd's output: " + output);
      *command = cmd;
      *direct = want_direct;
      if (!want_direct) *note = "the file system refused iflag=direct; dd read through the page cache";
      return Status::ok();
    }
    if (!want_direct) return Status::io_error("dd failed (" + std::to_string(code) + "): " + output);
  }
  return Status::internal("unreachable");
}

Status run_agent_workload(const Model& model, const AgentWorkloadOptions& options, AgentResult* out) {
  if (options.prefix_tokens < 1 || options.project_tokens < 0 || options.message_tokens < 1 ||
      options.reply_tokens < 1 || options.projects < 1 || options.turns < 1 || options.turns_after < 0)
    return Status::invalid(
        "the workload needs prefix >= 1, project >= 0, message >= 1 and reply >= 1 tokens, projects >= 1, turns >= 1, "
        "turns after the restart >= 0");
  if (options.bank_dir.empty()) return Status::invalid("no bank directory given");
  *out = AgentResult();
  Bench bench(model, options, out);
  return bench.run();
}

}  // namespace sb
