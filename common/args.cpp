#include "common/args.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sb {

Status Args::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    if (switches_.count(name)) {
      if (inline_value) return Status::invalid("--" + name + " takes no value");
      static const std::string kSet = "1";  // a std::string: GCC 12 misreads the char* copy here (-Wrestrict)
      values_[name] = kSet;
    } else if (flags_.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argc) return Status::invalid("--" + name + " needs a value");
        value = argv[++i];
      }
      values_[name] = value;
      all_values_[name].push_back(value);
    } else {
      return Status::invalid("unknown flag --" + name);
    }
  }
  return Status::ok();
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  auto it = all_values_.find(name);
  return it == all_values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

Status Args::get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi, int64_t* out) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    *out = fallback;
    return Status::ok();
  }
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno != 0)
    return Status::invalid("--" + name + " wants an integer, got '" + it->second + "'");
  if (v < lo || v > hi)
    return Status::invalid("--" + name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = v;
  return Status::ok();
}

Status Args::get_double(const std::string& name, double fallback, double* out) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    *out = fallback;
    return Status::ok();
  }
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0') return Status::invalid("--" + name + " wants a number, got '" + it->second + "'");
  *out = v;
  return Status::ok();
}

Status Args::get_size(const std::string& name, uint64_t fallback, uint64_t* out) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    *out = fallback;
    return Status::ok();
  }
  Status s = parse_size(it->second, out);
  if (!s) return Status::invalid("--" + name + ": " + s.message());
  return Status::ok();
}

Status parse_size(const std::string& text, uint64_t* out) {
  if (text.empty()) return Status::invalid("empty size");
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return Status::invalid("size '" + text + "' does not start with a number");
  std::string suffix = text.substr(digits);
  if (suffix.size() == 2 && (suffix[1] == 'B' || suffix[1] == 'b')) suffix.pop_back();
  uint64_t mult = 1;
  if (suffix.empty() || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "k") mult = 1ULL << 10;
  else if (suffix == "M" || suffix == "m") mult = 1ULL << 20;
  else if (suffix == "G" || suffix == "g") mult = 1ULL << 30;
  else if (suffix == "T" || suffix == "t") mult = 1ULL << 40;
  else return Status::invalid("size '" + text + "' has an unknown suffix (use K, M, G or T)");
  if (digits > 15) return Status::invalid("size '" + text + "' is too large");
  uint64_t v = std::stoull(text.substr(0, digits));
  if (v > (~0ULL) / mult) return Status::invalid("size '" + text + "' is too large");
  *out = v * mult;
  return Status::ok();
}

Status read_secret_file(const std::string& flag, const std::string& path, std::string* secret) {
  std::ifstream in(path);
  if (!in) return Status::io_error("cannot read " + flag + " " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string k = ss.str();
  while (!k.empty() && (k.back() == '\n' || k.back() == '\r' || k.back() == ' ')) k.pop_back();
  if (k.empty()) return Status::invalid(flag + " " + path + " is empty");
  if (k.find_first_of("\n\r") != std::string::npos) return Status::invalid(flag + " " + path + " holds more than one line");
  *secret = k;
  return Status::ok();
}

Status read_private_secret_file(const std::string& flag, const std::string& path, std::string* secret) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::io_error("cannot read " + flag + " " + path);
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::invalid(flag + " " + path + " may be read or written by other users (mode " + mode +
                           "); chmod 600 it");
  }
  std::string k;
  SB_RETURN_IF_ERROR(read_secret_file(flag, path, &k));
  if (k.size() < 16) return Status::invalid(flag + " " + path + " holds fewer than 16 characters; use a long random secret");
  *secret = std::move(k);
  return Status::ok();
}

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "statebank %s: %s\n", command, message.c_str());
  return 2;
}

int print_usage(const char* usage) {
  std::printf("%s\n", usage);
  return 0;
}

}  // namespace sb
