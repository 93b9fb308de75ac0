// statebank serve: the OpenAI-compatible HTTP server (server/server.h).
//
// Signals: SIGTERM and SIGINT are taken by one thread (blocked everywhere
// else); the server then finishes the requests it accepted, stops listening,
// writes out the bank's SSD queue and stops its writers, all within
// --shutdown-deadline (what is not on disk by then is dropped), and the
// process exits 0. Only a request still running in the engine at the
// deadline makes it leave without joining its threads (_Exit).
//
// Exposure: the server binds 127.0.0.1 unless --host says otherwise. A host
// that is not a loopback address needs API keys (--api-key, --api-key-file,
// or --api-keys-file with one key per tenant), or --insecure-no-key to serve
// an open port on purpose. Tenants and the shared namespace:
// server/protocols/namespace.h.
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "bank/remote/redis_connection.h"
#include "bank/ssd_tier.h"
#include "cli/commands.h"
#include "bank/bank_factory.h"
#include "model/model_arg.h"
#include "common/args.h"
#include "common/thread_priority.h"
#include "server/backend/engine_backend.h"
#include "server/backend/model_files.h"
#include "server/server.h"

namespace sb {
namespace {

const char* kUsage =
    "usage: statebank serve --model DIR|FILE.gguf|demo [--weights TYPE] [--host 127.0.0.1] [--port 8000] [--bank-dir "
    "DIR] [--ram-bank SIZE] "
    "[--ssd-bank SIZE] [--ssd on|off|read-only] [--block-tokens 256] [--snapshot-every 2048] [--threads N] "
    "[--precision bf16|f32] "
    "[--api-key KEY | --api-key-file FILE | --api-keys-file FILE [--shared-namespace TENANT]] "
    "[--max-prompt-tokens N] [--max-body-bytes SIZE] [--audit RATE] "
    "[--max-running N] [--batch-tokens N] [--itl-ratio R] [--speculative off|auto|ngram|mtp] [--draft-max K] "
    "[--speculative-acceptance exact|rejection] [--mtp-vocab 32768] "
    "[--max-queue N] [--max-tokens-limit N] [--request-timeout SECONDS] "
    "[--shutdown-deadline SECONDS] [--max-connections N] [--header-timeout SECONDS] [--body-timeout SECONDS] "
    "[--write-timeout SECONDS] [--slow-reader-threads N] [--slow-reader-threads-per-peer N] [--background-nice N] "
    "[--response-buffer SIZE] [--response-buffer-total SIZE] [--max-pins-per-tenant N] [--max-pinned-bytes SIZE] "
    "[--tenant-share F] [--insecure-no-key] [--served-model-name NAME ...] [--max-tokens-cap N] "
    "[--ignore-cache-control] [--keep-billing-header] [--sampling-defaults model|greedy] "
    "[--remote redis://HOST:PORT[/DB]|redis-cluster://HOST:PORT[,HOST:PORT...] --remote-secret-file FILE [--remote-password-file FILE] [--remote-ttl SECONDS] "
    "[--remote-timeout-ms MS]] [--kv-events tcp://HOST:PORT]";

// The flags that take a value.
const std::set<std::string> kServeFlags = {"model",
                                           "host",
                                           "port",
                                           "bank-dir",
                                           "ram-bank",
                                           "ssd-bank",
                                           "ssd",
                                           "block-tokens",
                                           "snapshot-every",
                                           "threads",
                                           "precision",
                                           "weights",
                                           "api-key",
                                           "api-key-file",
                                           "api-keys-file",
                                           "shared-namespace",
                                           "max-prompt-tokens",
                                           "max-body-bytes",
                                           "audit",
                                           "max-running",
                                           "batch-tokens",
                                           "itl-ratio",
                                           "max-queue",
                                           "max-tokens-limit",
                                           "request-timeout",
                                           "shutdown-deadline",
                                           "max-connections",
                                           "header-timeout",
                                           "body-timeout",
                                           "write-timeout",
                                           "slow-reader-threads",
                                           "slow-reader-threads-per-peer",
                                           "background-nice",
                                           "response-buffer",
                                           "response-buffer-total",
                                           "max-pins-per-tenant",
                                           "max-pinned-bytes",
                                           "tenant-share",
                                           "remote",
                                           "remote-password-file",
                                           "remote-secret-file",
                                           "remote-ttl",
                                           "remote-timeout-ms",
                                           "kv-events",
                                           "served-model-name",
                                           "max-tokens-cap",
                                           "speculative",
                                           "draft-max",
                                           "mtp-vocab",
                                           "speculative-acceptance",
                                           "sampling-defaults"};

std::string base_name(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  size_t slash = d.rfind('/');
  return slash == std::string::npos ? d : d.substr(slash + 1);
}

// The numeric flags of the HTTP layer and the bank, parsed and checked
// together; the engine's go straight into its options (engine_flags).
struct ServeFlags {
  int64_t port, threads, max_prompt, max_tokens_limit, max_tokens_cap, request_timeout_s, deadline_s, remote_ttl,
      remote_timeout, max_connections, header_timeout_s, body_timeout_s, write_timeout_s, max_pins, slow_readers,
      slow_readers_per_peer, background_nice;
  uint64_t max_pinned_bytes, max_body, response_buffer, response_buffer_total;
  double audit;
};

// The engine's flags into its options, checked once by EngineOptions::validate().
Status engine_flags(const Args& args, EngineOptions* e) {
  int64_t block_tokens, snapshot_every, max_running, batch_tokens, max_queue, draft_max;
  Status s;
  if (!(s = args.get_int("block-tokens", 256, 64, 1 << 20, &block_tokens)) ||
      !(s = args.get_int("snapshot-every", 2048, 0, int64_t{1} << 40, &snapshot_every)) ||
      !(s = args.get_int("max-running", 8, 1, 256, &max_running)) ||
      !(s = args.get_int("batch-tokens", 512, 1, 1 << 20, &batch_tokens)) ||
      !(s = args.get_int("max-queue", 64, 1, 1 << 16, &max_queue)) ||
      !(s = args.get_double("itl-ratio", 2.0, &e->itl_ratio)) ||
      !(s = args.get_double("tenant-share", 0.5, &e->tenant_share)) ||
      !(s = args.get_int("draft-max", 4, 1, kMaxDraftTokens, &draft_max)))
    return s;
  e->block_tokens = static_cast<uint32_t>(block_tokens);
  e->snapshot_every = snapshot_every;
  e->max_running = static_cast<int>(max_running);
  e->batch_tokens = batch_tokens;
  e->max_queue = static_cast<size_t>(max_queue);
  e->draft_max = static_cast<int>(draft_max);
  const std::string mode = args.get("speculative", "auto");
  if (!parse_speculative_mode(mode, &e->speculative))
    return Status::invalid("--speculative must be one of " + std::string(kSpeculativeModes) + ", not '" + mode + "'");
  const std::string acceptance = args.get("speculative-acceptance", "exact");
  if (!parse_speculative_acceptance(acceptance, &e->speculative_acceptance))
    return Status::invalid("--speculative-acceptance must be one of " + std::string(kSpeculativeAcceptances) +
                           ", not '" + acceptance + "'");
  return e->validate();
}

Status parse_flags(const Args& args, ServeFlags* f, EngineBackendOptions* eo) {
  Status s;
  if (!(s = args.get_int("port", 8000, 0, 65535, &f->port)) ||
      !(s = args.get_int("threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024, &f->threads)) ||
      !(s = args.get_int("max-prompt-tokens", 0, 0, int64_t{1} << 40, &f->max_prompt)) ||
      !(s = args.get_int("request-timeout", 1800, 0, 7 * 86400, &f->request_timeout_s)) ||
      !(s = args.get_int("max-tokens-limit", 32768, 1, int64_t{1} << 30, &f->max_tokens_limit)) ||
      !(s = args.get_int("max-tokens-cap", 0, 0, int64_t{1} << 30, &f->max_tokens_cap)) ||
      !(s = args.get_int("shutdown-deadline", 30, 1, 86400, &f->deadline_s)) ||
      !(s = args.get_int("max-connections", 1024, 1, 1 << 20, &f->max_connections)) ||
      !(s = args.get_int("header-timeout", 10, 1, 3600, &f->header_timeout_s)) ||
      !(s = args.get_int("body-timeout", 60, 1, 86400, &f->body_timeout_s)) ||
      !(s = args.get_int("write-timeout", 10, 1, 3600, &f->write_timeout_s)) ||
      // 0: the defaults (a quarter of the request threads; a quarter of that a client).
      !(s = args.get_int("slow-reader-threads", 0, 0, 1 << 20, &f->slow_readers)) ||
      !(s = args.get_int("slow-reader-threads-per-peer", 0, 0, 1 << 20, &f->slow_readers_per_peer)) ||
      !(s = args.get_int("background-nice", 10, 0, 19, &f->background_nice)) ||
      !(s = args.get_size("response-buffer", 256u << 10, &f->response_buffer)) ||
      !(s = args.get_size("response-buffer-total", 64u << 20, &f->response_buffer_total)) ||
      !(s = args.get_int("max-pins-per-tenant", 32, 0, 1 << 20, &f->max_pins)) ||
      !(s = args.get_int("remote-ttl", 86400, 0, int64_t{1} << 31, &f->remote_ttl)) ||
      !(s = args.get_int("remote-timeout-ms", 500, 1, 600000, &f->remote_timeout)) ||
      !(s = args.get_size("max-body-bytes", 16u << 20, &f->max_body)) ||
      !(s = args.get_size("ram-bank", 2ull << 30, &eo->bank.ram_bytes)) ||
      !(s = args.get_size("ssd-bank", 0, &eo->bank.ssd_bytes)) || !(s = args.get_double("audit", 0.0, &f->audit)) ||
      // A tenant's pins hold at most a quarter of the RAM tier by default.
      !(s = args.get_size("max-pinned-bytes", eo->bank.ram_bytes / 4, &f->max_pinned_bytes)))
    return s;
  if (!(f->audit >= 0.0 && f->audit <= 1.0)) return Status::invalid("--audit must be a rate in [0, 1]");
  if (f->max_body < 1024) return Status::invalid("--max-body-bytes must be at least 1K");
  if (f->response_buffer < (4u << 10) || f->response_buffer > (1u << 30))
    return Status::invalid("--response-buffer must be between 4K and 1G");
  if (f->response_buffer_total < f->response_buffer || f->response_buffer_total > (64ull << 30))
    return Status::invalid("--response-buffer-total must be between --response-buffer and 64G");
  return engine_flags(args, &eo->engine);
}

// --remote and the flags that go with it.
Status parse_remote(const Args& args, const ServeFlags& f, BankOptions* bank) {
  Status s;
  if (!args.has("remote")) {
    for (const char* flag : {"remote-password-file", "remote-secret-file", "remote-ttl", "remote-timeout-ms"})
      if (args.has(flag)) return Status::invalid(std::string("--") + flag + " needs --remote");
    return Status::ok();
  }
  bank->remote = args.get("remote");
  RedisAddress address;  // checked here too, so a bad URL fails before the model loads
  if (!(s = parse_redis_url(bank->remote, &address))) return Status::invalid("--remote: " + s.message());
  if (args.has("remote-password-file") &&
      !(s = read_secret_file("--remote-password-file", args.get("remote-password-file"), &bank->remote_password)))
    return s;
  // Every Redis value is authenticated under this secret (docs/bank.md, "The remote tier").
  if (!args.has("remote-secret-file"))
    return Status::invalid("--remote needs --remote-secret-file FILE (the key that authenticates the shared values)");
  if (!(s = read_private_secret_file("--remote-secret-file", args.get("remote-secret-file"), &bank->remote_secret)))
    return s;
  bank->remote_ttl = std::chrono::seconds(f.remote_ttl);
  bank->remote_timeout = std::chrono::milliseconds(f.remote_timeout);
  return Status::ok();
}

// The API keys, the shared namespace, and the refusal to serve a non-loopback
// address open by accident.
Status parse_keys(const Args& args, ServerOptions* so) {
  Status s;
  if (args.has("api-key") + args.has("api-key-file") + args.has("api-keys-file") > 1)
    return Status::invalid("give at most one of --api-key, --api-key-file and --api-keys-file");
  if (args.has("api-key")) {
    const std::string key = args.get("api-key");
    if (key.empty()) return Status::invalid("--api-key is empty");
    so->keys = ApiKeys::single(key);
  } else if (args.has("api-key-file")) {
    std::string key;
    if (!(s = read_secret_file("--api-key-file", args.get("api-key-file"), &key))) return s;
    so->keys = ApiKeys::single(key);
  } else if (args.has("api-keys-file")) {
    if (!(s = ApiKeys::load_file(args.get("api-keys-file"), &so->keys))) return s;
  }
  if (args.has("shared-namespace")) {
    so->shared_tenant = args.get("shared-namespace");
    if (!args.has("api-keys-file"))
      return Status::invalid("--shared-namespace needs --api-keys-file (tenants to share it between)");
    if (!so->keys.has_tenant(so->shared_tenant))
      return Status::invalid("--shared-namespace " + so->shared_tenant + ": no such tenant in --api-keys-file");
  }
  if (!host_is_loopback(so->host) && so->keys.empty() && !args.has("insecure-no-key"))
    return Status::invalid("refusing to serve " + so->host +
                           " without an API key: give --api-key, --api-key-file or --api-keys-file, or "
                           "--insecure-no-key to serve it open on purpose");
  return Status::ok();
}

// Each connection is a descriptor: make room for the cap (and the bank's files).
void raise_file_limit(int64_t max_connections) {
  rlimit files{};
  const rlim_t want = static_cast<rlim_t>(max_connections) + 256;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < want) {
    files.rlim_cur = std::min(want, files.rlim_max);
    setrlimit(RLIMIT_NOFILE, &files);
    if (files.rlim_cur < want)
      std::fprintf(stderr,
                   "statebank serve: only %llu descriptors allowed; --max-connections %lld may not be reached\n",
                   static_cast<unsigned long long>(files.rlim_cur), static_cast<long long>(max_connections));
  }
}

// Serves until SIGTERM or SIGINT (or a failure), then shuts down; the exit code.
int serve_until_signalled(Server& server, const sigset_t& signals) {
  std::atomic<bool> done{false};
  Status shutdown_status;
  bool shut_down = false;
  std::thread waiter([&] {
    timespec tick{0, 200 * 1000 * 1000};
    while (!done) {
      int sig = sigtimedwait(&signals, nullptr, &tick);
      if (sig == SIGTERM || sig == SIGINT) {
        std::fprintf(stderr, "statebank serve: %s: finishing accepted requests, flushing the bank\n",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT");
        shutdown_status = server.shutdown();
        shut_down = true;
        return;
      }
    }
  });
  Status served = server.serve();
  done = true;
  waiter.join();
  if (!shut_down) {
    shutdown_status = server.shutdown();
    if (!served) return fail("serve", served.message());
  }
  if (!shutdown_status) std::fprintf(stderr, "statebank serve: %s\n", shutdown_status.message().c_str());
  if (!server.idle()) {
    // A request still runs in the engine (a prefill cannot be
    // interrupted): joining it could take minutes. The bank is closed
    // already (its writers stopped, what was not on disk dropped, and
    // publication is atomic), so leaving at once loses nothing stored.
    std::fflush(stderr);
    std::_Exit(0);
  }
  std::fprintf(stderr, "statebank serve: stopped\n");
  return 0;
}

// The HTTP layer's options from the flags.
Status server_options(const Args& args, const ServeFlags& f, ServerOptions* so) {
  so->host = args.get("host", "127.0.0.1");
  so->port = static_cast<int>(f.port);
  SB_RETURN_IF_ERROR(parse_keys(args, so));
  so->max_body_bytes = f.max_body;
  so->limits.max_prompt_tokens = f.max_prompt;
  so->limits.max_tokens_limit = f.max_tokens_limit;
  so->max_tokens_cap = f.max_tokens_cap;
  so->cache_control_pins = !args.has("ignore-cache-control");
  so->limits.keep_billing_header = args.has("keep-billing-header");
  for (const std::string& name : args.get_all("served-model-name")) {
    if (name.empty() || name.size() > kMaxFieldBytes)
      return Status::invalid("--served-model-name must be 1 to 1024 bytes");
    so->served_model_names.push_back(name);
  }
  so->request_timeout = std::chrono::seconds(f.request_timeout_s);
  so->shutdown_deadline = std::chrono::seconds(f.deadline_s);
  so->max_connections = static_cast<size_t>(f.max_connections);
  so->header_timeout = std::chrono::seconds(f.header_timeout_s);
  so->body_timeout = std::chrono::seconds(f.body_timeout_s);
  so->write_timeout = std::chrono::seconds(f.write_timeout_s);
  so->slow_reader_threads = static_cast<size_t>(f.slow_readers);
  so->slow_reader_threads_per_peer = static_cast<size_t>(f.slow_readers_per_peer);
  so->response_buffer_bytes = f.response_buffer;
  so->response_buffer_total_bytes = f.response_buffer_total;
  so->max_pins_per_tenant = static_cast<size_t>(f.max_pins);
  so->max_pinned_bytes_per_tenant = f.max_pinned_bytes;
  return Status::ok();
}

// The model, the engine and the bank's options from the flags (the bank's
// tiers are parsed before: parse_flags, parse_remote).
Status backend_options(const Args& args, const ServeFlags& f, EngineBackendOptions* eo) {
  const std::string model_arg = args.get("model");
  SB_RETURN_IF_ERROR(resolve_model_dir(model_arg, &eo->model_dir));
  SB_RETURN_IF_ERROR(apply_weights_arg(args.get("weights"), &eo->model_dir));
  eo->model_id = model_arg == "demo" ? "demo" : base_name(eo->model_dir);
  eo->threads = static_cast<int>(f.threads);
  SB_RETURN_IF_ERROR(parse_precision_arg(args.get("precision"), &eo->precision));
  SB_RETURN_IF_ERROR(args.get_int("mtp-vocab", eo->mtp_draft_vocab, 0, int64_t{1} << 31, &eo->mtp_draft_vocab));
  eo->bank.ssd_dir = args.get("bank-dir", default_bank_dir());
  if (eo->bank.ssd_mode != SsdMode::kOff && eo->bank.ssd_dir.empty())
    return Status::invalid("no --bank-dir given and neither XDG_CACHE_HOME nor HOME is set");
  eo->audit_rate = f.audit;
  return Status::ok();
}

// --sampling-defaults model (the model's recommended sampling for the fields
// a request leaves out) or greedy (none: such a request decodes greedily).
Status sampling_defaults(const Args& args, const std::string& model_dir, SamplingDefaults* out) {
  const std::string mode = args.get("sampling-defaults", "model");
  if (mode == "greedy") return Status::ok();
  if (mode != "model") return Status::invalid("--sampling-defaults must be model or greedy, not '" + mode + "'");
  return load_sampling_defaults(model_dir, out);
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask and
  // only the waiter in serve_until_signalled() sees the signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Args args(kServeFlags, {"insecure-no-key", "ignore-cache-control", "keep-billing-header", "help"});
  Status s = args.parse(argc, argv);
  if (!s) return fail("serve", s.message() + "\n" + kUsage);
  if (args.has("help")) return print_usage(kUsage);
  if (!args.positional().empty()) return fail("serve", "unexpected argument '" + args.positional()[0] + "'\n" + kUsage);
  if (!args.has("model")) return fail("serve", std::string("--model is required\n") + kUsage);

  ServerOptions so;
  EngineBackendOptions eo;
  ServeFlags f;
  if (!(s = parse_flags(args, &f, &eo))) return fail("serve", s.message());
  if (!(s = parse_ssd_mode(args.get("ssd", "on"), &eo.bank.ssd_mode))) return fail("serve", "--ssd: " + s.message());
  if (!(s = parse_remote(args, f, &eo.bank))) return fail("serve", s.message());
  eo.bank.kv_events = args.get("kv-events", "");  // checked when the bank opens

  if (!(s = server_options(args, f, &so))) return fail("serve", s.message());
  // Before any thread it lowers starts (the bank's writers, the server's preparing threads).
  set_background_nice(static_cast<int>(f.background_nice));
  raise_file_limit(f.max_connections);
  if (!(s = backend_options(args, f, &eo))) return fail("serve", s.message());
  if (!(s = sampling_defaults(args, eo.model_dir, &so.limits.sampling_defaults))) return fail("serve", s.message());

  std::unique_ptr<EngineBackend> backend;
  if (!(s = EngineBackend::open(eo, &backend))) return fail("serve", s.to_string());
  if (backend->context_length() > 0 && f.max_prompt > backend->context_length())
    return fail("serve", "--max-prompt-tokens (" + std::to_string(f.max_prompt) +
                             ") exceeds the model's context length (" + std::to_string(backend->context_length()) +
                             "); it can only lower it");
  Server server(backend.get(), backend.get(), so);
  int bound = 0;
  if (!(s = server.bind(&bound))) return fail("serve", s.message());
  std::printf("statebank serve: listening on http://%s:%d (model %s, bank %s, ssd %s, remote %s)\n", so.host.c_str(),
              bound, eo.model_id.c_str(), eo.bank.ssd_mode == SsdMode::kOff ? "-" : eo.bank.ssd_dir.c_str(),
              ssd_mode_name(eo.bank.ssd_mode), eo.bank.remote.empty() ? "-" : eo.bank.remote.c_str());
  std::fflush(stdout);
  return serve_until_signalled(server, signals);
}

}  // namespace sb
