// The agent workload (`statebank bench agent`): what the bank buys on
// prompts that share a long prefix, beside the same requests served with the
// bank bypassed, in one run (the workload, the restart and the replica:
// docs/development.md, "The agent workload's design").
// Contract:
//  - every bank request has a bypass twin run right after it; a difference
//    in tokens or logprob bits is recorded (`mismatches`), never hidden;
//  - token ids are deterministic from the seed;
//  - the SSD (and remote) write queues are flushed outside the timed region,
//    so a request's time never includes another's writes.
// Thread safety: run_agent_workload() uses the model it is given from one
// thread; call it from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/state.h"

namespace sb {

class Model;

class Engine;

struct AgentWorkloadOptions {
  int64_t prefix_tokens = 8192;
  int64_t project_tokens = 1024;
  int64_t message_tokens = 40;
  int64_t reply_tokens = 32;  // max_tokens of every request (greedy, no stop token)
  int projects = 3;
  int turns = 2;        // turns before the restart
  int turns_after = 1;  // turns after the restart
  uint32_t block_tokens = 256;
  int64_t snapshot_every = 2048;
  uint64_t ram_bytes = 8ull << 30;
  int top_logprobs = 5;  // compared bit for bit with the bypass twin
  uint64_t seed = 1;
  // The SSD tier's directory: created; must not hold a bank already.
  std::string bank_dir;
  // A scratch file on the bank's file system for the dd read baseline
  // (written, read with dd, removed). Empty: no baseline.
  std::string dd_file;
  // The shared remote tier: redis://HOST:PORT[/DB]; empty: none.
  std::string remote_url;
  std::string remote_password;
  // (No secret to give: each run authenticates its own values, under its own
  // key prefix, with a random secret of its own.)
  std::chrono::milliseconds remote_timeout{5000};
  std::function<void(const std::string&)> progress;  // one line per step; may be null
  // Tests only: called with each engine the run creates, before its first
  // request (a test sets EngineTestHooks there to break every restore on
  // purpose, proving the comparison with the bypass twin sees it).
  std::function<void(Engine& engine)> on_engine;
};

// One request, as a CSV row.
struct AgentRow {
  int request = 0;          // index of the (bank, bypass) pair, from 1
  std::string phase;        // "before" or "after" the restart, or on the "replica"
  int turn = 0;             // turn of the conversation, from 0 (continues after the restart)
  int project = 0;
  std::string mode;         // "bank" (kDefault) or "bypass"
  std::string served;       // RestoreRecord::mode: cold, ram, ssd, mixed, bypass
  int64_t prompt_tokens = 0;
  int64_t message_boundary = 0;
  double ttft_ms = 0;
  double total_ms = 0;      // the whole complete() call
  int64_t restore_point = 0;
  int64_t snapshot_position = 0;
  int64_t prefill_tokens = 0;
  int64_t blocks = 0;
  uint64_t bytes_read = 0;
  double lookup_ms = 0;     // chain keys + plan (the reads of the SSD tier happen here)
  double restore_ms = 0;    // composing and checking the State
  double prefill_ms = 0;
  int64_t generated = 0;
  double ttft_ratio = 0;    // bank rows: ttft / the bypass twin's ttft
  bool equal_to_bypass = true;  // bank rows: tokens and logprob bits equal the twin's
  uint64_t disk_bytes = 0;  // bank rows: bytes of the files under the bank dir after this request
  // Bank rows with a remote tier: bytes on its sockets during the request and
  // its write-out (received: mostly the restore's reads; sent: the publishes).
  uint64_t wire_received = 0, wire_sent = 0;
  uint64_t naive_bytes = 0; // bank rows: sum over bank requests so far of their whole state
  uint64_t ideal_bytes = 0; // bank rows: distinct blocks + needed snapshots so far
  std::vector<int32_t> tokens;  // generated ids
};

struct AgentResult {
  std::vector<AgentRow> rows;       // in run order: bank row, then its bypass twin
  std::vector<std::string> mismatches;  // one line per bank row that differs from its twin
  // State sizes of the model.
  uint64_t block_state_bytes = 0;     // one full block: rows of every sequence/pooled component + token ids
  uint64_t snapshot_state_bytes = 0;  // one snapshot: every recurrent component
  // Bank contents at the end (after the final flush).
  uint64_t disk_bytes = 0;            // sum of file sizes under the bank dir
  uint64_t disk_files = 0;
  uint64_t ssd_blocks = 0, ssd_snapshots = 0;
  // Summed over both SSD tier instances (before and after the restart):
  // objects the bank published that never reached the disk.
  uint64_t ssd_dropped_puts = 0, ssd_write_errors = 0;
  uint64_t naive_bytes = 0, ideal_bytes = 0;
  uint64_t distinct_blocks = 0, needed_snapshots = 0;
  // What the files on disk hold beyond the ideal: snapshots the placement
  // rules took that no request of this run restored from (interval and
  // message-boundary snapshots, kept for prompts that diverge there), and the
  // rest (file headers and part tables; an object stored twice would show
  // here too).
  uint64_t unused_snapshots = 0, unused_snapshot_bytes = 0;
  int64_t other_disk_bytes = 0;
  // dd baseline on the bank's file system.
  bool dd_ran = false;
  std::string dd_command;
  bool dd_direct = false;   // iflag=direct was accepted
  uint64_t dd_bytes = 0;
  double dd_seconds = 0;
  std::string dd_note;      // why it did not run, or a fallback
  double wall_seconds = 0;  // the whole workload
  // The remote tier, summed over every bank that had one.
  bool remote = false;
  uint64_t remote_wire_received = 0, remote_wire_sent = 0;
  uint64_t remote_dropped_puts = 0, remote_write_errors = 0, remote_check_failures = 0;
};

// Runs the workload on `model`.
Status run_agent_workload(const Model& model, const AgentWorkloadOptions& options, AgentResult* out);

// Reads `file` with `dd if=FILE of=/dev/null bs=4M iflag=direct` in a
// subprocess and parses the bytes and seconds dd reports; without direct I/O
// (the file system refuses it) it retries buffered and says so in `note`.
Status dd_read(const std::string& file, std::string* command, bool* direct, uint64_t* bytes, double* seconds,
               std::string* note);

}  // namespace sb
