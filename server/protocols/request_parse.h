// Request parsing: JSON bodies of /v1/completions and /v1/chat/completions
// into validated structs, before anything touches a model (the rules in full:
// docs/serving.md, "Request validation").
// Contract:
//  - every field used is type- and range-checked; a violation is an ApiError
//    (400, or 413 for an over-long prompt) whose `param` names the field;
//  - every OpenAI field does what it says or is refused naming it, a field
//    OpenAI does not define too; the accepted no-ops: docs/interface.md;
//  - token ids (a prompt's, logit_bias's) are checked against the vocabulary,
//    so every id the engine gets is in [0, vocab);
//  - strings are bounded before anything keeps or tokenises them
//    (kMaxFieldBytes, prompt_bytes_limit());
//  - response_format json_schema is compiled here; what the constraint does
//    not support is a 400 naming the keyword and its path.
// Pure functions of their inputs; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_shape.h"
#include "constrain/grammar.h"
#include "engine/engine.h"
#include "server/backend/backend.h"
#include "server/backend/model_files.h"
#include "server/protocols/errors.h"

namespace sb {

// The longest string field that is not prompt text.
inline constexpr size_t kMaxFieldBytes = 1024;
// Bytes of prompt text allowed per token of max_prompt_tokens: far above
// what real text takes per token (about 4), so that a prompt over the limit in
// bytes is over it in tokens too, and cheap to refuse before tokenising.
inline constexpr size_t kPromptBytesPerToken = 16;

// The largest max_tokens a body may ask for: more than --max-tokens-limit is
// not refused but lowered to it (docs/interface.md, "A reply the server's
// limit cuts"), so that a client retrying with a larger limit does not loop
// into a 400. 2^53: what a JavaScript client can send exactly.
inline constexpr int64_t kMaxTokensAccepted = int64_t{1} << 53;

struct ParseLimits {
  int64_t vocab_size = 0;            // token ids must be in [0, vocab_size)
  int64_t max_prompt_tokens = 0;     // 0: unlimited (checked again after tokenising text)
  int64_t max_tokens_limit = 32768;  // a larger max_tokens is lowered to it
  int64_t default_chat_max_tokens = 1024;
  int max_json_depth = kMaxJsonDepth;
  size_t max_json_object_keys = kMaxJsonObjectKeys;  // keys in one object of a body
  size_t max_json_keys = kMaxJsonKeys;               // keys in all of a body's objects
  size_t max_stop = 16;
  bool has_mtp = false;  // speculative mode mtp is refused without (the backend's checkpoint has no MTP head)
  bool keep_billing_header = false;  // --keep-billing-header (server/protocols/anthropic/messages_parse.h)
  SamplingDefaults sampling_defaults;  // --sampling-defaults model: the model's; greedy: none
};

// Fields shared by both endpoints.
struct CommonParams {
  std::string model;  // empty: the served model
  int64_t max_tokens = 16;
  SamplingParams sampling;
  bool seed_given = false;        // else the server draws one and reports it
  float presence_penalty = 0.0f;  // [-2, 2], over the generated tokens
  float frequency_penalty = 0.0f; // [-2, 2], per occurrence in the generated tokens
  float repetition_penalty = 1.0f;  // (0, 2], over prompt and generated tokens
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id, bias in [-100, 100]
  // response_format: null for text; else what the output must match.
  std::shared_ptr<const constrain::Grammar> response_grammar;
  std::vector<std::string> stop;  // non-empty strings
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool has_cache_salt = false;
  std::string cache_salt;
  // statebank's extension: `speculative: {mode, draft_max}` (engine/speculation.h).
  SpeculativeParams speculative;
};

struct CompletionParams : CommonParams {
  bool prompt_is_text = true;
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  int logprobs = -1;  // -1: none; else 0..20 alternatives per token
  bool echo = false;
};

// The conversation (what the template renders, server/backend/backend.h),
// and how the reply is given.
struct ChatParams : CommonParams, ChatConversation {
  bool tool_choice_named = false;  // tool_choice names a function
  bool parallel_tool_calls = true;
  bool logprobs = false;
  int top_logprobs = 0;
};

// kPromptBytesPerToken * max_prompt_tokens; 0 (no limit) when that is 0.
size_t prompt_bytes_limit(const ParseLimits& limits);

// Deepest nesting of arrays and objects in `body` (a lexical scan that needs
// no parse, so a hostile body cannot exhaust the stack first).
int json_nesting_depth(std::string_view body);

// Parses a request body: checks depth, then syntax. Throws ApiException.
nlohmann::ordered_json parse_body(std::string_view body, const ParseLimits& limits);

// Throw ApiException on the first invalid field.
CompletionParams parse_completion_params(const nlohmann::ordered_json& body, const ParseLimits& limits);
ChatParams parse_chat_params(const nlohmann::ordered_json& body, const ParseLimits& limits);

// The model's defaults into p (before a body's own fields overwrite them).
void apply_sampling_defaults(const SamplingDefaults& d, CommonParams* p);

// X-Cache-Mode header value (empty: default). Throws ApiException.
CacheMode parse_cache_mode(const std::string& header);

}  // namespace sb
