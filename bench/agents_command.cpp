// statebank bench agents: replays captured agent sessions (the bodies an
// agent sent, turn by turn: tests/data/agents/<agent>/, listed in order with
// their protocol by the directory's session.json) through the server's own
// parsing, template and engine, and reports each turn's time to first token
// as the agent gets it (the bank on: each session starts on an empty bank, so
// its first turn is cold and later turns restore what earlier ones stored)
// next to the same request with the bank bypassed, and whether the two
// replies are equal bit for bit. A session's `next_sessions` are the first
// turns of other sessions of the same agent (a new conversation, not a
// continued one), run after its turns on the same bank: the cross-session
// rows, what a new session gets from the bank.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/command_util.h"
#include "bench/commands.h"
#include "model/model_arg.h"
#include "common/args.h"
#include "server/backend/engine_backend.h"
#include "server/protocols/anthropic/messages_parse.h"
#include "server/protocols/completion_setup.h"
#include "server/protocols/responses/responses_parse.h"

namespace sb {

const char* const kAgentsUsage =
    "usage: statebank bench agents [--preset 0.8b|small|tiny] [--arch qwen3_5] [--model DIR|FILE.gguf|demo]\n"
    "         [--cache-dir DIR] [--weights TYPE] [--precision bf16|f32] [--session DIR]... [--threads 2]\n"
    "         [--max-tokens 8] [--block-tokens 256] [--ram-bank 4G] [--report FILE.md] [--csv FILE.csv]\n"
    "         [--plot-script FILE] [--no-plots]";

namespace {

namespace fs = std::filesystem;

const char* const kDefaultSessions[] = {"tests/data/agents/claude-code-2.1.332", "tests/data/agents/codex-0.171.0",
                                        "tests/data/agents/claude-code-2.1.332-sessions",
                                        "tests/data/agents/codex-0.171.0-sessions"};

// A captured session: its turns in the order the agent sent them, and the
// route they were sent to ("messages": /v1/messages, "responses": /v1/responses).
struct Session {
  std::string dir, agent, protocol;
  std::vector<fs::path> turns;
  std::vector<fs::path> next_sessions;  // first turns of other sessions, after `turns`
};

struct TurnResult {
  std::string agent, file;
  int turn = 0;
  std::string phase;  // cold (turn 1), warm (a later turn), new session
  int64_t prompt = 0, restored = 0, stored = 0;
  std::string served;
  double bank_ms = 0, bypass_ms = 0;
  bool equal = false;
  double ratio() const { return bypass_ms > 0 ? bank_ms / bypass_ms : 0.0; }
};

// A default session directory (a path in the source tree) from the working
// directory, else from the binary's: the build directory sits in the tree.
std::string find_source_dir(const std::string& rel) {
  std::error_code ec;
  for (fs::path start : {fs::current_path(ec), fs::read_symlink("/proc/self/exe", ec).parent_path()}) {
    for (fs::path d = start; !d.empty(); d = d.parent_path()) {
      if (fs::is_directory(d / rel, ec)) return (d / rel).string();
      if (d == d.parent_path()) break;
    }
  }
  return rel;
}

Status load_session(const std::string& dir, Session* out) {
  const fs::path manifest = fs::path(dir) / "session.json";
  std::error_code ec;
  if (!fs::is_regular_file(manifest, ec)) return Status::not_found("no session manifest " + manifest.string());
  const auto j = nlohmann::json::parse(read_text(manifest), nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) { return Status::invalid(manifest.string() + ": " + why); };
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("protocol") || !j["protocol"].is_string()) return bad("\"protocol\" must be a string");
  if (!j.contains("turns") || !j["turns"].is_array() || j["turns"].empty())
    return bad("\"turns\" must be a non-empty array of file names");
  out->dir = dir;
  out->protocol = j["protocol"];
  if (out->protocol != "messages" && out->protocol != "responses")
    return bad("\"protocol\" must be \"messages\" or \"responses\", not \"" + out->protocol + "\"");
  out->agent =
      j.contains("agent") && j["agent"].is_string() ? j["agent"].get<std::string>() : fs::path(dir).filename().string();
  for (const char* key : {"turns", "next_sessions"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_array()) return bad(std::string("\"") + key + "\" must be an array of file names");
    for (const auto& t : j[key]) {
      if (!t.is_string()) return bad(std::string("every entry of \"") + key + "\" must be a file name");
      const fs::path file = fs::path(dir) / t.get<std::string>();
      if (!fs::is_regular_file(file, ec)) return bad("turn file " + file.string() + " does not exist");
      (std::string(key) == "turns" ? out->turns : out->next_sessions).push_back(file);
    }
  }
  return Status::ok();
}

bool same_tokens(const CompletionResult& a, const CompletionResult& b) {
  if (a.tokens.size() != b.tokens.size()) return false;
  for (size_t i = 0; i < a.tokens.size(); ++i)
    if (a.tokens[i].token != b.tokens[i].token || a.tokens[i].logprob != b.tokens[i].logprob) return false;
  return true;
}

// The turn's body as the chat request its route runs (server/protocols/anthropic/messages_parse.h,
// server/protocols/responses/responses_parse.h), greedy and not streamed.
ChatParams parse_turn(const std::string& protocol, const std::string& body, const ParseLimits& limits) {
  ChatParams chat = protocol == "messages" ? parse_messages_params(parse_body(body, limits), limits).chat
                                           : parse_responses_params(parse_body(body, limits), limits).chat;
  chat.model.clear();  // the agent's name for the model
  chat.sampling.temperature = 0;
  chat.stream = false;
  return chat;
}

// One turn, at most `max_tokens`: with the bank, then bypassed.
Status run_turn(EngineBackend& backend, const Session& session, const fs::path& file, int64_t max_tokens,
                TurnResult* out) {
  ParseLimits limits;
  limits.vocab_size = backend.vocab_size();
  CompletionInput in;
  in.request_id = "bench";
  PreparedCompletion prepared;
  try {
    prepared = prepare_chat_completion(backend, limits, in, parse_turn(session.protocol, read_text(file), limits));
  } catch (const ApiException& e) {
    return Status::invalid(file.string() + ": " + e.error.message);
  }
  CompletionRequest request = std::move(prepared.request);
  request.max_tokens = max_tokens;
  request.make_processor = nullptr;
  CompletionResult bank, bypass;
  SB_RETURN_IF_ERROR(backend.complete(request, &bank));
  request.cache_mode = CacheMode::kBypass;
  SB_RETURN_IF_ERROR(backend.complete(request, &bypass));
  out->agent = session.agent;
  out->file = file.filename().string();
  out->prompt = static_cast<int64_t>(request.prompt.size());
  out->restored = bank.restore.restore_point;
  out->stored = bank.restore.stored_tokens;
  out->served = bank.restore.mode.name();
  out->bank_ms = bank.ttft_ms;
  out->bypass_ms = bypass.ttft_ms;
  out->equal = same_tokens(bank, bypass);
  return Status::ok();
}

// A session on a fresh backend (so on an empty bank), turn by turn.
Status run_session(const EngineBackendOptions& eo, const Session& session, int64_t max_tokens,
                   std::vector<TurnResult>* results) {
  std::unique_ptr<EngineBackend> backend;
  SB_RETURN_IF_ERROR(EngineBackend::open(eo, &backend));
  for (size_t i = 0; i < session.turns.size(); ++i) {
    std::fprintf(stderr, "statebank bench: agents: %s, %s\n", session.agent.c_str(),
                 session.turns[i].filename().c_str());
    TurnResult r;
    SB_RETURN_IF_ERROR(run_turn(*backend, session, session.turns[i], max_tokens, &r));
    r.turn = static_cast<int>(i) + 1;
    r.phase = i == 0 ? "cold" : "warm";
    results->push_back(r);
  }
  for (const fs::path& file : session.next_sessions) {
    std::fprintf(stderr, "statebank bench: agents: %s, new session %s\n", session.agent.c_str(), file.filename().c_str());
    TurnResult r;
    SB_RETURN_IF_ERROR(run_turn(*backend, session, file, max_tokens, &r));
    r.turn = 1;
    r.phase = "new session";
    results->push_back(r);
  }
  (void)backend->close_bank(std::chrono::milliseconds(1000));
  return Status::ok();
}

std::string csv_text(const std::vector<TurnResult>& turns) {
  std::ostringstream out;
  out << "index,agent,turn,file,phase,prompt_tokens,served,restored,stored,ttft_bank_ms,ttft_bypass_ms,ratio,equal\n";
  char line[512];
  for (size_t i = 0; i < turns.size(); ++i) {
    const TurnResult& t = turns[i];
    std::snprintf(line, sizeof line, "%zu,%s,%d,%s,%s,%lld,%s,%lld,%lld,%.1f,%.1f,%.4f,%d\n", i, t.agent.c_str(),
                  t.turn, t.file.c_str(), t.phase.c_str(), static_cast<long long>(t.prompt),
                  t.served.c_str(), static_cast<long long>(t.restored), static_cast<long long>(t.stored), t.bank_ms,
                  t.bypass_ms, t.ratio(), t.equal ? 1 : 0);
    out << line;
  }
  return out.str();
}

// Empty on success, else why there is no plot.
std::string draw_plot(const std::string& script, const std::string& csv, const std::string& png) {
  if (!on_path("gnuplot")) return "gnuplot is not installed (apt-get install gnuplot-nox), so no plot was drawn";
  if (script.empty()) return "tools/bench/agents_plot.gp was not found, so no plot was drawn";
  for (const auto& p : {csv, png})
    if (p.find('\'') != std::string::npos || p.find('"') != std::string::npos)
      return "a path holds a quote character, so no plot was drawn";
  const std::string vars = "csv='" + csv + "'; png='" + png + "'";
  const std::string cmd = "gnuplot -e " + quote_arg(vars) + " " + quote_arg(script) + " 1>&2";
  if (std::system(cmd.c_str()) != 0) return "gnuplot failed (" + cmd + ")";
  return "";
}

struct ReportContext {
  std::string model, command, csv_name, plot_name, plot_note;
  int threads = 0;
};

std::string report(const std::vector<TurnResult>& turns, const ReportContext& c) {
  std::ostringstream md;
  md << "# Agent sessions: time to first token per turn\n\n"
     << "Generated by `statebank bench agents` on " << utc_now() << " (" << cpu_name() << ", " << c.threads
     << " threads, on a machine shared with other work, so times vary from run to run), model " << c.model
     << ". Reproduce with:\n\n```sh\n"
     << c.command << "\n```\n\n"
     << "Each turn is the body the agent sent, parsed and rendered as its route (`/v1/messages` for Claude Code, "
        "`/v1/responses` for Codex) does, run greedy for a few tokens: first with the bank, as the agent meets it "
        "(each session starts on an empty bank, so its turn 1 is *cold*: nothing to restore, its state stored; "
        "later turns restore what earlier turns stored), then with the bank bypassed. *ratio* is the bank's time "
        "to first token over the bypass's; the target is at most 10 % for every turn after the first. *equal*: "
        "the two replies have the same tokens and logprobs, bit for bit. A *new session* row is the first turn of "
        "another session of the same agent (a new conversation, not `--continue`), run after the rows above it on "
        "the same bank: *restored* over *prompt tokens* is the share a new session gets from the bank.\n\n"
     << "| agent | turn | phase | prompt tokens | served | restored | stored | ttft, bank | ttft, bypass | ratio | "
        "equal |\n"
     << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  char line[640];
  for (const auto& t : turns) {
    std::snprintf(
        line, sizeof line, "| %s | %d (`%s`) | %s | %lld | %s | %lld | %lld | %.0f ms | %.0f ms | %.1f %% | %s |\n",
        t.agent.c_str(), t.turn, t.file.c_str(), t.phase.c_str(), static_cast<long long>(t.prompt),
        t.served.c_str(), static_cast<long long>(t.restored), static_cast<long long>(t.stored), t.bank_ms, t.bypass_ms,
        100.0 * t.ratio(), t.equal ? "yes" : "**no**");
    md << line;
  }
  md << "\nPer-turn data: " << c.csv_name << ".\n\n";
  if (!c.plot_name.empty()) md << "![time to first token per turn, bank and bypass](" << c.plot_name << ")\n";
  if (!c.plot_note.empty()) md << c.plot_note << "\n";
  return md.str();
}

}  // namespace

int bench_agents(int argc, char** argv) {
  Args args({"model", "arch", "preset", "cache-dir", "weights", "precision", "session", "threads", "max-tokens",
             "block-tokens", "ram-bank", "report", "csv", "plot-script"},
            {"no-plots", "help"});
  Status s = args.parse(argc, argv);
  if (!s) return fail("bench", s.message() + "\n" + kAgentsUsage);
  if (args.has("help")) return print_usage(kAgentsUsage);
  if (!args.positional().empty())
    return fail("bench", "unexpected argument '" + args.positional()[0] + "'\n" + kAgentsUsage);
  int64_t threads, max_tokens, block_tokens;
  EngineBackendOptions eo;
  if (!(s = args.get_int("threads", 2, 1, 256, &threads)) ||
      !(s = args.get_int("max-tokens", 8, 1, 4096, &max_tokens)) ||
      !(s = args.get_int("block-tokens", 256, 64, 1 << 20, &block_tokens)) ||
      !(s = args.get_size("ram-bank", 4ull << 30, &eo.bank.ram_bytes)) ||
      !(s = parse_precision_arg(args.get("precision"), &eo.precision)))
    return fail("bench", s.message());
  if (block_tokens % kGrid != 0) return fail("bench", "--block-tokens must be a multiple of " + std::to_string(kGrid));
  std::vector<std::string> dirs = args.get_all("session");
  if (dirs.empty())
    for (const char* rel : kDefaultSessions) dirs.push_back(find_source_dir(rel));
  std::vector<Session> sessions(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i)
    if (!(s = load_session(dirs[i], &sessions[i]))) return fail("bench", s.to_string());
  const std::string report_path = args.get("report");
  std::string csv = args.get("csv");
  if (csv.empty() && !report_path.empty()) csv = fs::path(report_path).replace_extension(".csv").string();

  BenchModel bm;
  if (!(s = resolve_bench_model(args, &bm))) return fail("bench", s.to_string());
  eo.model_dir = bm.dir;
  eo.model_id = "bench";
  eo.threads = static_cast<int>(threads);
  eo.engine.block_tokens = static_cast<uint32_t>(block_tokens);
  eo.bank.ssd_mode = SsdMode::kOff;
  std::vector<TurnResult> results;
  for (const Session& session : sessions)
    if (!(s = run_session(eo, session, max_tokens, &results))) return fail("bench", s.to_string());

  ReportContext c;
  c.model = bm.description;
  c.threads = static_cast<int>(threads);
  c.command = "tools/statebank.sh bench agents";
  for (int i = 1; i < argc; ++i) c.command.append(" ").append(quote_arg(argv[i]));
  c.csv_name = "(no CSV: give --csv or --report)";
  if (!csv.empty()) {
    if (!(s = write_text(csv, csv_text(results)))) return fail("bench", s.to_string());
    std::error_code ec;
    const fs::path base = fs::absolute(report_path.empty() ? fs::path(csv) : fs::path(report_path)).parent_path();
    c.csv_name = "[" + fs::relative(fs::absolute(csv), base, ec).string() + "](" +
                 fs::relative(fs::absolute(csv), base, ec).string() + ")";
    const std::string png = fs::path(csv).replace_extension(".png").string();
    const std::string why = args.has("no-plots")
                                ? "Plot not drawn (--no-plots)."
                                : draw_plot(args.get("plot-script", find_plot_script("agents_plot.gp")), csv, png);
    if (why.empty()) {
      c.plot_name = fs::relative(fs::absolute(png), base, ec).string();
    } else {
      c.plot_note = why;
      std::fprintf(stderr, "statebank bench: %s\n", why.c_str());
    }
  }
  const std::string md = report(results, c);
  if (!report_path.empty() && !(s = write_text(report_path, md))) return fail("bench", s.to_string());
  std::printf("%s", md.c_str());
  const bool all_equal = std::all_of(results.begin(), results.end(), [](const TurnResult& t) { return t.equal; });
  if (!all_equal) std::fprintf(stderr, "statebank bench: FAILED: a bank reply differs from its bypass run\n");
  return all_equal ? 0 : 1;
}

}  // namespace sb
