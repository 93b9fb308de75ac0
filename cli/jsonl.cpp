#include "cli/jsonl.h"

#include <cstdio>
#include <iostream>

namespace sb {

Status map_jsonl_stdin(const std::function<Status(const nlohmann::json& in, nlohmann::json* out)>& each) {
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    nlohmann::json out;
    if (Status s = each(nlohmann::json::parse(line, nullptr, false), &out); !s)
      return Status::invalid("stdin line " + std::to_string(n) + ": " + s.message());
    const std::string text = out.dump();
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  }
  if (std::cin.bad()) return Status::io_error("reading stdin failed");
  return Status::ok();
}

Status finish_stdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) return Status::io_error("writing stdout failed");
  return Status::ok();
}

}  // namespace sb
