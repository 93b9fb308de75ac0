#include "bench/bench_flags.h"

#include <sys/resource.h>

#include <cerrno>  // program_invocation_short_name
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace sb::bench {

int fail(const Status& s) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, s.to_string().c_str());
  return 2;
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

Status positive_ints(const std::string& flag, const std::string& text, char sep, std::vector<int64_t>* out) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, sep)) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1)
      return Status::invalid("--" + flag + ": '" + item + "' is not a positive integer");
    out->push_back(v);
  }
  if (out->empty()) return Status::invalid("--" + flag + " is empty");
  return Status::ok();
}

Status matrix_shapes(const std::string& flag, const std::string& text, std::vector<std::pair<int64_t, int64_t>>* out) {
  std::stringstream ss(text);
  std::string shape;
  while (std::getline(ss, shape, ',')) {
    std::vector<int64_t> nk;
    SB_RETURN_IF_ERROR(positive_ints(flag, shape, 'x', &nk));
    if (nk.size() != 2) return Status::invalid("--" + flag + ": '" + shape + "' is not NxK");
    out->emplace_back(nk[0], nk[1]);
  }
  if (out->empty()) return Status::invalid("--" + flag + " is empty");
  return Status::ok();
}

}  // namespace sb::bench
