// CompletionSetup: what a completion route makes of its HTTP request before
// anything runs: the engine's request, the response builder's setup and the
// chat output parser. Everything a client can get wrong is found here.
//
// Thread safety: a pure function of its inputs and the backend's const
// methods; safe from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "server/backend/backend.h"
#include "server/protocols/namespace.h"
#include "server/backend/bank_admin.h"
#include "server/protocols/generation.h"
#include "server/protocols/renderer.h"
#include "server/protocols/request_parse.h"

namespace sb {

struct CompletionInput {
  std::string_view body;
  std::string cache_mode_header;  // X-Cache-Mode
  bool chat = false;
  const Tenant* tenant = nullptr;  // the presented key's tenant (null without keys)
  std::string shared_tenant;       // --shared-namespace (empty: none)
  std::string request_id;
  // Other names the served model answers to (--served-model-name); the
  // response shows the name the request used.
  std::vector<std::string> model_aliases;
  int64_t max_tokens_cap = 0;  // --max-tokens-cap: more is cut to this (0: none)
};

struct PreparedCompletion {
  CompletionRequest request;  // on_token and cancelled are the caller's to set
  GenerationSetup setup;
  std::unique_ptr<ChatOutput> chat_output;
  std::unique_ptr<Renderer> renderer;  // set by the route's Protocol::prepare
  std::vector<PinSpec> pins;           // prefixes the request asks the bank to keep (cache_control)
};

// The OpenAI routes' request (renderer left unset: openai_protocol() sets it).
// Throws ApiException (400, 404 unknown model, 413 prompt over the limit)
// naming the field at fault.
PreparedCompletion prepare_completion(const Backend& backend, const ParseLimits& limits, const CompletionInput& in);
// The same for a body a route has already parsed (with parse_body, or made
// from one), so that no body is parsed twice; in.body is not read.
PreparedCompletion prepare_parsed_completion(const Backend& backend, const ParseLimits& limits,
                                             const CompletionInput& in, const nlohmann::ordered_json& body);

// A chat request already parsed (another protocol's body made into ChatParams):
// renders it and sets up everything prepare_completion does for chat.
PreparedCompletion prepare_chat_completion(const Backend& backend, const ParseLimits& limits, const CompletionInput& in,
                                           ChatParams params);

// Whether `model` (empty: not given) names the served model or an alias;
// else throws 404 model_not_found.
void check_model_name(const Backend& backend, const CompletionInput& in, const std::string& model);

}  // namespace sb
