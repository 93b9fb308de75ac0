// Messages parsing: the body of Anthropic's POST /v1/messages (and
// /v1/messages/count_tokens) into the chat request every route renders
// through the checkpoint's template (ChatParams, request_parse.h); the
// mapping, field by field: docs/interface.md, "HTTP (Anthropic Messages)".
// Contract:
//  - the same conversation sent to /v1/chat/completions renders the same
//    tokens;
//  - every field has its effect, is a documented no-op, or is a 400 naming
//    it; server tools that cannot run here are left out with a warning;
//  - a system block starting with kBillingHeaderPrefix is left out (unless
//    limits.keep_billing_header);
//  - at most 4 cache_control marks, each a CacheBreakpoint (the conversation
//    up to that block, and its TTL) for the bank's pins.
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
