// Args: the command-line parser shared by every statebank subcommand.
//
// Flags are `--name value` or `--name=value`; switches are `--name` alone.
// A flag not declared by the command, a missing value or a bad number is an
// error with one clear message (main prints it on one line, exit 2).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace sb {

class Args {
 public:
  // `flags` take a value, `switches` do not.
  Args(std::set<std::string> flags, std::set<std::string> switches) : flags_(std::move(flags)), switches_(std::move(switches)) {}
  Status parse(int argc, char** argv);  // argv[0] is the subcommand name

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Every value a repeatable flag was given, in order (get() returns the last).
  std::vector<std::string> get_all(const std::string& name) const;
  Status get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi, int64_t* out) const;
  Status get_double(const std::string& name, double fallback, double* out) const;
  // SIZE with optional suffix K, M, G, T (powers of 1024), e.g. 512M.
  Status get_size(const std::string& name, uint64_t fallback, uint64_t* out) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::set<std::string> flags_, switches_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_values_;
  std::vector<std::string> positional_;
};

Status parse_size(const std::string& text, uint64_t* out);

// A secret (API key, password) from a one-line file: trailing newline and
// spaces dropped; an empty file or more than one line is an error. `flag`
// names the file's flag in messages; the secret itself is never printed.
Status read_secret_file(const std::string& flag, const std::string& path, std::string* secret);
// The same for a secret that must stay private (the remote tier's MAC key):
// also refuses a file that other users may read or write (any of mode 077;
// chmod 600 it) and a secret shorter than 16 characters.
Status read_private_secret_file(const std::string& flag, const std::string& path, std::string* secret);

// What every command prints on the way out: "statebank <command>: <message>"
// on stderr, returning exit code 2; and a command's --help, its usage on
// stdout, returning 0.
int fail(const char* command, const std::string& message);
int print_usage(const char* usage);

}  // namespace sb
