// Responses request parsing: a POST /v1/responses body (OpenAI's Responses
// API) becomes the /v1/chat/completions body that asks for the same thing,
// which parse_chat_params() then validates, so one conversation renders the
// same prompt through either route (the mapping, field by field:
// docs/interface.md, `POST /v1/responses`).
// Contract:
//  - every top-level field has its effect, is a documented no-op, or is a 400
//    naming it; errors name the Responses field (input[3].call_id,
//    text.format.schema), also those the chat parser finds;
//  - input items map to chat messages in order (instructions first; a
//    function_call_output needs an earlier function_call with its call_id);
//  - tools that cannot run here (web_search, mcp, ...) are left out of the
//    prompt with a warning, not refused.
// Pure functions; safe from any thread.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "server/protocols/request_parse.h"

namespace sb {

struct ResponsesParams {
  ChatParams chat;  // what the engine runs
  // What the response object echoes (OpenAI's Response fields).
  nlohmann::ordered_json instructions;                             // string or null
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as sent
  nlohmann::ordered_json tool_choice = "auto";                     // as sent
  nlohmann::ordered_json text_format = {{"type", "text"}};
  nlohmann::ordered_json reasoning_effort;   // string or null
  nlohmann::ordered_json max_output_tokens;  // integer or null
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  bool reasoning_summary = false;  // reasoning.summary asked: the reasoning is its own summary
  bool output_logprobs = false;    // include: message.output_text.logprobs
  // A namespace tool's functions by the flat name the model sees: {namespace, name}.
  std::map<std::string, std::pair<std::string, std::string>> namespaced;
  std::vector<std::string> warnings;  // what was left out of the prompt, and why
};

// The name a namespace's function has in the prompt: namespace__name, as
// Codex CLI spells it where a namespace cannot be kept (underscores at the
// joint trimmed: "mcp__" + "_x" -> "mcp__x").
std::string namespaced_tool_name(const std::string& space, const std::string& name);

// A Responses body as the chat completions body that asks the same, with
// what the response echoes. The route hands chat_body to the chat path
// (prepare_completion), so everything the chat path does (templates, limits,
// grammars, the model check) holds for Responses as it does for chat.
struct ResponsesRequest {
  nlohmann::ordered_json chat_body;
  ResponsesParams echo;             // echo.chat is left empty
  std::vector<std::string> origin;  // the Responses path of chat_body.messages[i]

  // An error the chat path raised for chat_body, in Responses' words
  // (max_completion_tokens -> max_output_tokens, messages[2] -> input[1], ...).
  void rename(ApiError* e) const;
};

// Throws ApiException (400) naming the Responses field at fault.
ResponsesRequest translate_responses(const nlohmann::ordered_json& body);

// translate_responses() and parse_chat_params(): the whole parse, for tests
// and tools. Throws ApiException (400; 413 for prompt text over the limit)
// naming the Responses field at fault.
ResponsesParams parse_responses_params(const nlohmann::ordered_json& body, const ParseLimits& limits);

}  // namespace sb
