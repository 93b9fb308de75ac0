// Messages parsing: the body of Anthropic's POST /v1/messages (and
// /v1/messages/count_tokens) into the chat request every route renders
// through the checkpoint's template (ChatParams, server/protocols/request_parse.h).
//
// Promises:
//  1. The conversation becomes what the template expects: `system` (a string
//     or text blocks, joined by blank lines) a system message; text blocks
//     joined by blank lines; an assistant's `thinking` its reasoning_content
//     and its `tool_use` blocks its tool_calls (input as compact JSON);
//     each `tool_result` a `tool` message (before the user's text, in
//     order); `tools` function tools with parameters = input_schema. The
//     same conversation sent to /v1/chat/completions renders the same tokens.
//  2. tool_choice: auto, any (-> required), tool (-> that function), none;
//     disable_parallel_tool_use -> parallel_tool_calls false. thinking:
//     enabled / disabled set the template's switch, adaptive leaves it.
//  3. Every field has its effect, or is a no-op listed in docs/interface.md
//     (metadata, service_tier, context_management, output_config,
//     thinking.budget_tokens, tool_result is_error, redacted_thinking,
//     citations), or is refused with a 400 naming it: image and document
//     blocks, a tool_result without its tool_use, an unknown block type or
//     field. Strings and prompt bytes are bounded as for chat. Server tools
//     (a `type` other than custom: web_search_..., code_execution_..., ...)
//     cannot run here: they are left out of the prompt with a warning.
//  5. A system text block that starts with kBillingHeaderPrefix is left out
//     (unless limits.keep_billing_header).
//  4. cache_control {"type": "ephemeral", "ttl": "5m"|"1h"} marks a block;
//     at most 4 per request. Each becomes a CacheBreakpoint: the conversation
//     up to the end of that block, and the TTL, for the bank's pins.
// Pure functions; safe from any thread. Throw ApiException.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/protocols/request_parse.h"

namespace sb {

struct CacheBreakpoint {
  ChatParams prefix;  // the conversation up to the end of the marked block
  int64_t ttl_s = 300;
};

struct MessagesParams {
  ChatParams chat;
  std::vector<CacheBreakpoint> breakpoints;  // in prompt order
  std::vector<std::string> warnings;         // what was left out of the prompt, and why
};

// Claude Code's first system block starts so: billing metadata for
// Anthropic's service whose suffix changes per conversation. It is left out
// of the prompt unless ParseLimits::keep_billing_header (--keep-billing-header),
// so that sessions share the system prompt and tools behind it.
inline constexpr const char* kBillingHeaderPrefix = "x-anthropic-billing-header:";

// `count_only`: /v1/messages/count_tokens (no max_tokens, no sampling fields).
MessagesParams parse_messages_params(const nlohmann::ordered_json& body, const ParseLimits& limits,
                                     bool count_only = false);

}  // namespace sb
