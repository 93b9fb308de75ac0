// Request parsing: JSON bodies of /v1/completions and /v1/chat/completions
// into validated structs, before anything touches a model.
//
// Promises:
//  1. Every field the server uses is type- and range-checked; a violation is an
//     ApiError (400, or 413 for an over-long prompt) whose `param` names the
//     field, e.g. "max_tokens" or "messages[1].content".
//  2. Fields the server does not know are ignored.
//  3. Token ids in a prompt are checked against the vocabulary here, so the
//     engine's REQUIRES (ids in [0, vocab)) holds for every request it gets.
// Pure functions of their inputs; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/errors.h"

namespace sb {

struct ParseLimits {
  int64_t vocab_size = 0;            // token ids must be in [0, vocab_size)
  int64_t max_prompt_tokens = 0;     // 0: unlimited (checked again after tokenising text)
  int64_t max_tokens_limit = 32768;  // upper bound of max_tokens
  int64_t default_chat_max_tokens = 1024;
  int max_json_depth = 64;
  size_t max_stop = 16;
};

// Fields shared by both endpoints.
struct CommonParams {
  std::string model;  // empty: the served model
  int64_t max_tokens = 16;
  SamplingParams sampling;
  std::vector<std::string> stop;  // non-empty strings
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool has_cache_salt = false;
  std::string cache_salt;
};

struct CompletionParams : CommonParams {
  bool prompt_is_text = true;
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  int logprobs = -1;  // -1: none; else 0..20 alternatives per token
  bool echo = false;
};

struct ChatParams : CommonParams {
  // Normalised messages: role, content (string), and where given
  // reasoning_content, tool_calls (id, type, function{name, arguments string}),
  // tool_call_id, name. Content arrays of text parts are joined.
  nlohmann::json messages = nlohmann::json::array();
  nlohmann::json tools = nlohmann::json::array();  // [{type:function, function:{name, description, parameters}}]
  // The same tools with the request's key order (set by the route from the
  // raw body), for templates that print schemas as the client sent them.
  nlohmann::ordered_json tools_ordered = nlohmann::ordered_json::array();
  std::string tool_choice = "auto";                // none, auto, required, or a function name
  bool logprobs = false;
  int top_logprobs = 0;
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking
};

// Deepest nesting of arrays and objects in `body` (a lexical scan that needs
// no parse, so a hostile body cannot exhaust the stack first).
int json_nesting_depth(std::string_view body);

// Parses a request body: checks depth, then syntax. Throws ApiException.
nlohmann::json parse_body(std::string_view body, const ParseLimits& limits);

// Throw ApiException on the first invalid field.
CompletionParams parse_completion_params(const nlohmann::json& body, const ParseLimits& limits);
ChatParams parse_chat_params(const nlohmann::json& body, const ParseLimits& limits);

// X-Cache-Mode header value (empty: default). Throws ApiException.
CacheMode parse_cache_mode(const std::string& header);

}  // namespace sb
