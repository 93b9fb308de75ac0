// libFuzzer target: request parsing (server/request_parse.h), every field of
// POST /v1/completions, /v1/chat/completions and /v1/responses
// (server/responses_parse.h) from the raw body to the parameters, including
// response_format schemas and tools (compiled through constrain/). The input
// is a body; the first byte chooses the route ('R': Responses; else odd:
// chat, even: completions). Any
// ApiException is a 4xx and fine; another exception, a crash, a leak or
// undefined behaviour is not.
// Run by tools/fuzz.sh (the README's test command) under ASan and UBSan.
#include <cstdint>
#include <string_view>

#include "server/request_parse.h"
#include "server/responses_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  sb::ParseLimits limits;
  limits.vocab_size = 151936;
  limits.max_prompt_tokens = 4096;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const nlohmann::ordered_json parsed = sb::parse_body(body, limits);
    if (data[0] == 'R')
      (void)sb::parse_responses_params(parsed, limits);
    else if (data[0] & 1)
      (void)sb::parse_chat_params(parsed, limits);
    else
      (void)sb::parse_completion_params(parsed, limits);
  } catch (const sb::ApiException&) {
  }
  return 0;
}
