// ServeProcess: runs the real `statebank serve` binary on a free loopback
// port for end-to-end tests, reads the port from its "listening on" line,
// and stops it with SIGTERM (checking that it exits 0).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace sb::testing {

// Runs a command and returns its exit status (for gen-model).
inline int run_command(const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs a shell command line and returns its exit status; *out gets its
// standard output (for node's test runner and its TAP report).
inline int run_shell(const std::string& command, std::string* out) {
  FILE* p = popen(command.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out->append(buf, n);
  return pclose(p);
}

// `statebank serve` with hostile flag values (checked before anything
// starts, so no model is read): a case holds when serve exits 2 with one
// line on stderr that starts with "statebank serve: FLAG" (the flag the
// case begins with) and holds `message`.
inline void expect_serve_refuses(const std::string& flags, const std::string& message) {
  std::string err;
  const int status =
      run_shell(std::string(SB_STATEBANK_BIN) + " serve --model demo --port 0 --ssd off " + flags + " 2>&1 >/dev/null",
                &err);
  ASSERT_TRUE(WIFEXITED(status)) << flags;
  EXPECT_EQ(WEXITSTATUS(status), 2) << flags << ": " << err;
  EXPECT_EQ(err.rfind("statebank serve: " + flags.substr(0, flags.find(' ')), 0), 0u) << flags << ": " << err;
  EXPECT_NE(err.find(message), std::string::npos) << flags << ": " << err;
  EXPECT_EQ(err.find('\n'), err.size() - 1) << flags << ": one line expected: " << err;
}

// Writes a generated checkpoint with the real Qwen3 tokenizer to `dir`
// (statebank gen-model, given `extra` flags too, e.g. --mtp-layers 1);
// gen-model's exit status, or -1 when SB_TOKENIZER_DIR is not set (the tests
// run through ctest, which sets it).
inline int gen_model(const std::string& dir, const std::string& arch, const std::string& preset, int seed,
                     const std::vector<std::string>& extra = {}) {
  const char* tok = std::getenv("SB_TOKENIZER_DIR");
  if (!tok) return -1;
  std::vector<std::string> argv = {SB_STATEBANK_BIN, "gen-model", "--arch", arch, "--preset", preset};
  argv.insert(argv.end(), {"--seed", std::to_string(seed)});
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--tokenizer", tok, dir});
  return run_command(argv);
}

// What a test says when gen_model did not return 0.
inline constexpr char kGenModelFailed[] = "gen-model failed (is SB_TOKENIZER_DIR set? run through ctest)";

// A new empty directory /tmp/<prefix>_XXXXXX (mkdtemp); the test removes it.
inline std::string make_temp_dir(const std::string& prefix) {
  std::string path = "/tmp/" + prefix + "_XXXXXX";
  if (!mkdtemp(path.data())) throw std::runtime_error("mkdtemp " + path + " failed");
  return path;
}

class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> argv) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      close(out[1]);
      std::vector<char*> a;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
    close(out[1]);
    FILE* f = fdopen(out[0], "r");
    char line[1024];
    const std::string marker = "listening on http://127.0.0.1:";
    while (std::fgets(line, sizeof line, f)) {
      std::string l(line);
      size_t at = l.find(marker);
      if (at != std::string::npos) {
        port = std::atoi(l.c_str() + at + marker.size());
        break;
      }
    }
    stdout_ = f;  // kept open so the server never writes into a closed pipe
    if (port <= 0) {
      stop();
      throw std::runtime_error("statebank serve did not start");
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) stop();
    if (stdout_) std::fclose(stdout_);
  }

  // SIGTERM, then the exit status (0 expected).
  int stop() {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_status_;
  }

  pid_t pid() const { return pid_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(300);
    return c;
  }

  int port = 0;

 private:
  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
  int exit_status_ = -1;
};

// /metrics of the server behind `c` once it holds `line` (the audit, say,
// runs in the background once the server is idle), polled for up to 60 s;
// the last body read either way ("" when the server did not answer).
inline std::string wait_for_metrics_line(httplib::Client& c, const std::string& line) {
  std::string metrics;
  for (int i = 0; i < 600; ++i) {
    auto r = c.Get("/metrics");
    if (!r) return "";
    metrics = r->body;
    if (metrics.find(line) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return metrics;
}

// A streamed POST of `body` to `path`: `receiver` gets each piece of the
// response as it arrives (returning false hangs up).
inline httplib::Request streamed_post(const std::string& path, const httplib::Headers& headers,
                                      const nlohmann::json& body, httplib::ContentReceiverWithProgress receiver) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = std::move(receiver);
  return req;
}

}  // namespace sb::testing
