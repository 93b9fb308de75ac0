// libFuzzer target: the Jinja interpreter (jinja/), which runs checkpoints'
// chat templates over requests' messages. The input is a template source,
// optionally followed by a NUL byte and a JSON context; without one (or
// when it does not parse) the template renders over a fixed conversation
// with tools. Parse errors and render errors are fine; a crash, a leak,
// undefined behaviour or a stack overflow is not.
// Run by tools/fuzz.sh (the README's test command) under ASan and UBSan.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "jinja/template.h"

namespace {

using Json = nlohmann::ordered_json;

const Json& default_context() {
  static const Json ctx = Json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "reasoning_content": "look it up",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
      {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "", "eos_token": "<|im_end|>"
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  sb::jinja::Template t;
  if (!sb::jinja::Template::parse(in.substr(0, nul), &t).is_ok()) return 0;
  Json ctx = default_context();
  if (nul != std::string_view::npos) {
    Json given = Json::parse(in.substr(nul + 1), nullptr, false);
    if (given.is_object()) ctx = std::move(given);
  }
  std::string out;
  (void)t.render(ctx, &out);
  return 0;
}
