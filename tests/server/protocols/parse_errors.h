// The request parsers' tests' shared pieces: the limits a test parses under
// and the error a parse raises, so each test reads as body -> error.
#pragma once

#include <cstdint>
#include <utility>

#include "server/protocols/errors.h"
#include "server/protocols/request_parse.h"

namespace sb::testing {

// A 1000-token vocabulary and max_tokens up to 4096; each test names the
// prompt bound and JSON depth its cases sit at.
inline ParseLimits parse_limits(int64_t max_prompt_tokens, int max_json_depth = ParseLimits{}.max_json_depth) {
  ParseLimits l;
  l.vocab_size = 1000;
  l.max_prompt_tokens = max_prompt_tokens;
  l.max_tokens_limit = 4096;
  l.max_json_depth = max_json_depth;
  return l;
}

// The error `parse()` raises as an ApiException, or a 0-status error when it
// returns (so a test can compare fields either way).
template <class Parse>
ApiError parse_error(Parse&& parse) {
  try {
    std::forward<Parse>(parse)();
  } catch (const ApiException& e) {
    return e.error;
  }
  return ApiError{0, "", "", "", ""};
}

}  // namespace sb::testing
