#include "server/completion_setup.h"

#include <chrono>

#include "server/namespace.h"

namespace sb {

using nlohmann::json;

PreparedCompletion prepare_completion(const Backend& backend, const ParseLimits& limits, const CompletionInput& in) {
  json body = parse_body(in.body, limits);
  const CacheMode cache_mode = parse_cache_mode(in.cache_mode_header);
  PreparedCompletion out;
  CompletionRequest& creq = out.request;
  GenerationSetup& setup = out.setup;
  setup.chat = in.chat;
  setup.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  setup.model = backend.model_id();
  setup.stop_token_ids = backend.stop_token_ids();
  const CommonParams* common = nullptr;
  ChatParams chat_params;
  CompletionParams completion_params;
  const char* prompt_param = "prompt";
  if (in.chat) {
    chat_params = parse_chat_params(body, limits);
    common = &chat_params;
    if (!chat_params.tools.empty()) {
      auto ordered = nlohmann::ordered_json::parse(in.body, nullptr, false);
      if (ordered.is_object() && ordered.contains("tools") && ordered["tools"].is_array())
        chat_params.tools_ordered = ordered["tools"];
    }
    prompt_param = "messages";
    ChatPrompt rendered;
    Status s = backend.render_chat(chat_params, &rendered);
    if (!s) throw ApiException{bad_request("messages", "cannot render the conversation: " + s.message())};
    creq.prompt = std::move(rendered.ids);
    creq.message_boundary = rendered.message_boundary;
    setup.logprobs = chat_params.logprobs ? chat_params.top_logprobs : -1;
    creq.top_logprobs = chat_params.top_logprobs;
    out.chat_output = backend.new_chat_output(chat_params);
    setup.id = "chatcmpl-" + in.request_id;
  } else {
    completion_params = parse_completion_params(body, limits);
    common = &completion_params;
    if (completion_params.prompt_is_text) {
      Status s = backend.encode(completion_params.prompt_text, &creq.prompt);
      if (!s) throw ApiException{bad_request("prompt", "cannot tokenize the prompt: " + s.message())};
      if (creq.prompt.empty()) throw ApiException{bad_request("prompt", "the prompt has no tokens")};
      setup.echo_text = completion_params.prompt_text;
    } else {
      creq.prompt = completion_params.prompt_ids;
      if (completion_params.echo) {
        auto ts = backend.new_text_stream();
        for (int32_t id : creq.prompt) setup.echo_text += ts->push(id);
        setup.echo_text += ts->finish();
      }
    }
    setup.logprobs = completion_params.logprobs;
    setup.echo = completion_params.echo;
    creq.top_logprobs = std::max(0, completion_params.logprobs);
    creq.echo = completion_params.echo && completion_params.logprobs >= 0;
    setup.id = "cmpl-" + in.request_id;
  }
  if (!common->model.empty() && common->model != backend.model_id())
    throw ApiException{not_found("model", "the model '" + common->model + "' does not exist; this server serves '" +
                                              backend.model_id() + "'",
                                 "model_not_found")};
  const auto n_prompt = static_cast<int64_t>(creq.prompt.size());
  if (limits.max_prompt_tokens > 0 && n_prompt > limits.max_prompt_tokens)
    throw ApiException{too_large(prompt_param,
                                 "the prompt has " + std::to_string(n_prompt) + " tokens, more than the limit of " +
                                     std::to_string(limits.max_prompt_tokens),
                                 "context_length_exceeded")};
  creq.max_tokens = common->max_tokens;
  creq.sampling = common->sampling;
  creq.stop_tokens = setup.stop_token_ids;
  creq.cache_mode = cache_mode;
  creq.name_space = derive_namespace(in.has_api_key, in.api_key, common->has_cache_salt, common->cache_salt);
  setup.stream = common->stream;
  setup.include_usage = common->include_usage;
  setup.stop = common->stop;
  setup.prompt_ids = creq.prompt;
  return out;
}

}  // namespace sb
