// libFuzzer target: request parsing (server/protocols/request_parse.h,
// server/protocols/responses/responses_parse.h, server/protocols/anthropic/messages_parse.h), every field of POST
// /v1/completions, /v1/chat/completions, /v1/responses and /v1/messages from
// the raw body to the parameters, including response_format schemas and tools
// (compiled through constrain/). The input is a body; the first byte chooses
// the route ('R' Responses; else its value modulo 3: '0' completions, '1'
// chat, '2' messages). Any
// ApiException is a 4xx and fine; another exception, a crash, a leak or
// undefined behaviour is not.
// Run by tools/fuzz.sh (the README's test command) under ASan and UBSan.
#include <cstdint>
#include <string_view>

#include "server/protocols/anthropic/messages_parse.h"
#include "server/protocols/request_parse.h"
#include "server/protocols/responses/responses_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  sb::ParseLimits limits;
  limits.vocab_size = 151936;
  limits.max_prompt_tokens = 4096;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const nlohmann::ordered_json parsed = sb::parse_body(body, limits);
    if (data[0] == 'R') {
      (void)sb::parse_responses_params(parsed, limits);
      return 0;
    }
    switch (data[0] % 3) {
      case 0:
        (void)sb::parse_completion_params(parsed, limits);
        break;
      case 1:
        (void)sb::parse_chat_params(parsed, limits);
        break;
      default:
        (void)sb::parse_messages_params(parsed, limits);
        break;
    }
  } catch (const sb::ApiException&) {
  }
  return 0;
}
