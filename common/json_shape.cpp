#include "common/json_shape.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace sb {
namespace {

std::atomic<uint64_t> json_parses_[2];

}  // namespace

void count_json_parse(JsonText what) { json_parses_[static_cast<size_t>(what)].fetch_add(1, std::memory_order_relaxed); }

uint64_t json_parses(JsonText what) { return json_parses_[static_cast<size_t>(what)].load(std::memory_order_relaxed); }

JsonShape json_shape(std::string_view text) {
  constexpr size_t kArray = static_cast<size_t>(-1);
  JsonShape shape;
  std::vector<size_t> open;  // per open container: its keys so far, or kArray
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      open.push_back(c == '[' ? kArray : 0);
      shape.depth = std::max(shape.depth, static_cast<int>(std::min<size_t>(open.size(), 1u << 30)));
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (c == ':' && !open.empty() && open.back() != kArray) {
      shape.most_keys = std::max(shape.most_keys, ++open.back());
      ++shape.keys;
    }
  }
  return shape;
}

}  // namespace sb
