#include "server/protocols/completion_setup.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "constrain/grammar.h"
#include "server/protocols/namespace.h"
#include "server/protocols/decoding_rules.h"
#include "tokenizer/chat_template.h"

namespace sb {

namespace {

using GrammarRef = std::shared_ptr<const constrain::Grammar>;

// /v1/chat/completions: renders the conversation; the grammar of the reply
// (response_format, or the calls tool_choice forces), if any.
GrammarRef prepare_chat(const Backend& backend, const CompletionInput& in, ChatParams* chat_params,
                        PreparedCompletion* out) {
  CompletionRequest& creq = out->request;
  GenerationSetup& setup = out->setup;
  const bool calls_forced = chat_params->tool_choice == "required" || chat_params->tool_choice_named;
  // A constrained reply is the answer itself: unless the request asks
  // for thinking, the template is told to leave it out.
  if ((calls_forced || chat_params->response_grammar) && !chat_params->enable_thinking.has_value())
    chat_params->enable_thinking = false;
  if (!chat_params->tool_arguments_parsed) {
    ChatTemplate::parse_tool_arguments(&chat_params->messages);
    chat_params->tool_arguments_parsed = true;
  }
  ChatPrompt rendered;
  Status s = backend.render_chat(*chat_params, &rendered);
  if (!s) throw ApiException{bad_request("messages", "cannot render the conversation: " + s.message())};
  GrammarRef grammar = chat_params->response_grammar;
  if (calls_forced) {
    nlohmann::ordered_json callable = nlohmann::ordered_json::array();
    for (const auto& t : chat_params->tools)
      if (!chat_params->tool_choice_named || t["function"]["name"] == chat_params->tool_choice) callable.push_back(t);
    std::shared_ptr<constrain::Grammar> calls;
    s = constrain::Grammar::tool_calls(callable,
                                       rendered.flavour == ChatFlavour::kQwen35Xml
                                           ? constrain::Grammar::CallSyntax::kXml
                                           : constrain::Grammar::CallSyntax::kJson,
                                       chat_params->parallel_tool_calls, &calls);
    if (!s)
      throw ApiException{bad_request(s.message().substr(0, s.message().find(':')), s.message(), "unsupported_schema")};
    grammar = calls;
  }
  if (grammar && rendered.opens_thinking) grammar = constrain::Grammar::after_reasoning(grammar);
  if (!chat_params->parallel_tool_calls) setup.max_tool_calls = 1;
  creq.prompt = std::move(rendered.ids);
  creq.message_boundary = rendered.message_boundary;
  setup.logprobs = chat_params->logprobs ? chat_params->top_logprobs : -1;
  creq.top_logprobs = chat_params->top_logprobs;
  out->chat_output = backend.new_chat_output(*chat_params, rendered);
  setup.id = "chatcmpl-" + in.request_id;
  return grammar;
}

// /v1/completions: tokenises a text prompt (or takes the ids), and the echo.
GrammarRef prepare_plain(const Backend& backend, const nlohmann::ordered_json& body, const ParseLimits& limits,
                         const CompletionInput& in, CompletionParams* params, PreparedCompletion* out) {
  CompletionRequest& creq = out->request;
  GenerationSetup& setup = out->setup;
  *params = parse_completion_params(body, limits);
  if (params->prompt_is_text) {
    Status s = backend.encode(params->prompt_text, &creq.prompt);
    if (!s) throw ApiException{bad_request("prompt", "cannot tokenize the prompt: " + s.message())};
    if (creq.prompt.empty()) throw ApiException{bad_request("prompt", "the prompt has no tokens")};
    setup.echo_text = params->prompt_text;
  } else {
    creq.prompt = params->prompt_ids;
    if (params->echo) {
      auto ts = backend.new_text_stream();
      for (int32_t id : creq.prompt) setup.echo_text += ts->push(id);
      setup.echo_text += ts->finish();
    }
  }
  setup.logprobs = params->logprobs;
  setup.echo = params->echo;
  creq.top_logprobs = std::max(0, params->logprobs);
  creq.echo = params->echo && params->logprobs >= 0;
  setup.id = "cmpl-" + in.request_id;
  return params->response_grammar;
}

// Penalties, logit bias and the grammar, as the request's logits processor
// (none when there are none).
void set_decoding_rules(const Backend& backend, const CommonParams& common, GrammarRef grammar, bool chat,
                        CompletionRequest* creq) {
  DecodingRules rules;
  rules.presence_penalty = common.presence_penalty;
  rules.frequency_penalty = common.frequency_penalty;
  rules.repetition_penalty = common.repetition_penalty;
  rules.logit_bias = common.logit_bias;
  rules.grammar = grammar;
  rules.vocabulary = backend.vocabulary();
  if (grammar && !rules.vocabulary)
    throw ApiException{
        bad_request(chat ? "tool_choice" : "response_format", "this server's model cannot constrain its output")};
  if (rules.repetition_penalty != 1.0f) rules.prompt = creq->prompt;
  if (!rules.empty()) {
    auto shared = std::make_shared<const DecodingRules>(std::move(rules));
    creq->make_processor = [shared] { return shared->make(); };
  }
}

// Issue 47: the prompt and what is generated after it must fit in the
// model's context. A prompt that leaves no room for one token is a 400;
// otherwise generation stops at the context's end (a "length" ending), never
// past the positions the model was built for. Kept apart from the operator's
// --max-tokens-cap: the context is the model's bound, not a policy, so the
// reply ends as a client's own limit would end it.
void fit_to_context(const Backend& backend, int64_t n_prompt, bool chat, CompletionRequest* creq,
                    GenerationSetup* setup) {
  const int64_t context = backend.context_length();
  if (context <= 0) return;
  if (n_prompt >= context)
    throw ApiException{bad_request(chat ? "messages" : "prompt",
                                   "the prompt has " + std::to_string(n_prompt) +
                                       " tokens, which leaves no room for a reply in the model's context length of " +
                                       std::to_string(context),
                                   "context_length_exceeded")};
  if (creq->max_tokens > context - n_prompt) {
    creq->max_tokens = context - n_prompt;
    setup->max_tokens_capped = 0;  // the context's end: "length", not the server's cap
  }
}

// What every route does once its body is parsed: the model's name, the
// prompt's length, sampling, decoding rules, cache mode and namespace.
void prepare_common(const Backend& backend, const ParseLimits& limits, const CompletionInput& in,
                    const CommonParams& common, GrammarRef grammar, bool chat, PreparedCompletion* out) {
  CompletionRequest& creq = out->request;
  GenerationSetup& setup = out->setup;
  check_model_name(backend, in, common.model);
  setup.chat = chat;
  setup.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  setup.model = common.model.empty() ? backend.model_id() : common.model;
  setup.stop_token_ids = backend.stop_token_ids();
  int64_t n_prompt = static_cast<int64_t>(creq.prompt.size());
  // The server's limits (--max-tokens-limit, the operator's --max-tokens-cap)
  // lower a larger max_tokens; a reply they cut ends as a normal end. Then
  // the context's end, which is the "length" a client's own limit gives.
  int64_t most = limits.max_tokens_limit;
  if (in.max_tokens_cap > 0) most = std::min(most, in.max_tokens_cap);
  creq.max_tokens = std::min(common.max_tokens, most);
  if (common.max_tokens > most) setup.max_tokens_capped = creq.max_tokens;
  fit_to_context(backend, n_prompt, chat, &creq, &setup);
  if (limits.max_prompt_tokens > 0 && n_prompt > limits.max_prompt_tokens)
    throw ApiException{too_large(chat ? "messages" : "prompt",
                                 "the prompt has " + std::to_string(n_prompt) + " tokens, more than the limit of " +
                                     std::to_string(limits.max_prompt_tokens),
                                 "context_length_exceeded")};
  creq.sampling = common.sampling;
  if (!common.seed_given) {
    // A fresh seed per request, reported in the response so it can be
    // replayed; 53 bits, so that JavaScript clients read it back exactly.
    static thread_local std::mt19937_64 seeds(std::random_device{}());
    creq.sampling.seed = seeds() >> 11;
  }
  setup.seed = creq.sampling.seed;
  set_decoding_rules(backend, common, grammar, chat, &creq);
  creq.stop_tokens = setup.stop_token_ids;
  creq.cache_mode = parse_cache_mode(in.cache_mode_header);
  creq.speculative = common.speculative;
  creq.name_space = request_namespace(in.tenant, common.has_cache_salt, common.cache_salt);
  if (!in.shared_tenant.empty() && in.tenant != nullptr && in.tenant->name != in.shared_tenant) {
    const Tenant shared{in.shared_tenant, false};
    creq.shared_name_space = request_namespace(&shared, false, "");
  }
  setup.stream = common.stream;
  setup.include_usage = common.include_usage;
  setup.stop = common.stop;
  setup.prompt_ids = creq.prompt;
  // The engine's own rules, before the request is admitted.
  if (const Status s = backend.check(creq); !s) throw ApiException{bad_request("", s.message())};
}

}  // namespace

void check_model_name(const Backend& backend, const CompletionInput& in, const std::string& model) {
  if (model.empty() || model == backend.model_id()) return;
  if (std::find(in.model_aliases.begin(), in.model_aliases.end(), model) != in.model_aliases.end()) return;
  throw ApiException{
      not_found("model", "the model '" + model + "' does not exist; this server serves '" + backend.model_id() + "'",
                "model_not_found")};
}

PreparedCompletion prepare_chat_completion(const Backend& backend, const ParseLimits& limits, const CompletionInput& in,
                                           ChatParams params) {
  parse_cache_mode(in.cache_mode_header);  // a bad header is refused before the render
  PreparedCompletion out;
  GrammarRef grammar = prepare_chat(backend, in, &params, &out);
  prepare_common(backend, limits, in, params, grammar, true, &out);
  return out;
}

PreparedCompletion prepare_completion(const Backend& backend, const ParseLimits& limits, const CompletionInput& in) {
  return prepare_parsed_completion(backend, limits, in, parse_body(in.body, limits));
}

PreparedCompletion prepare_parsed_completion(const Backend& backend, const ParseLimits& limits,
                                             const CompletionInput& in, const nlohmann::ordered_json& body) {
  parse_cache_mode(in.cache_mode_header);
  if (in.chat) return prepare_chat_completion(backend, limits, in, parse_chat_params(body, limits));
  PreparedCompletion out;
  CompletionParams params;
  GrammarRef grammar = prepare_plain(backend, body, limits, in, &params, &out);
  prepare_common(backend, limits, in, params, grammar, false, &out);
  return out;
}

}  // namespace sb
