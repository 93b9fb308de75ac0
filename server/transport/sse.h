// Server-sent events as OpenAI streams them: one `data: <json>` event per
// chunk, then `data: [DONE]`.
//
// Model text can hold invalid UTF-8 (a token that is half a character):
// dumping replaces it with U+FFFD rather than throwing.
//
// ResponseJson stores floating-point numbers as float32, so a logprob prints
// as the shortest decimal that reads back as the same float (at most 9
// significant digits), and two responses compare exactly as text. Stateless.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sb {

using ResponseJson = nlohmann::basic_json<std::map, std::vector, std::string, bool, std::int64_t, std::uint64_t, float>;

inline std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
inline std::string dump_json(const ResponseJson& j) {
  return j.dump(-1, ' ', false, ResponseJson::error_handler_t::replace);
}

inline std::string sse_event(const nlohmann::json& chunk) { return "data: " + dump_json(chunk) + "\n\n"; }
inline std::string sse_event(const ResponseJson& chunk) { return "data: " + dump_json(chunk) + "\n\n"; }

inline const std::string& sse_done() {
  static const std::string done = "data: [DONE]\n\n";
  return done;
}

}  // namespace sb
