#include "server/protocols/openai/openai_renderer.h"

#include "server/protocols/completion_setup.h"

namespace sb {

using json = ResponseJson;

namespace {

json bytes_array(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

}  // namespace

json OpenAiRenderer::chunk(json choice) const {
  return json{{"id", setup_.id},
              {"object", setup_.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", setup_.created},
              {"model", setup_.model},
              {"choices", json::array({std::move(choice)})}};
}

void OpenAiRenderer::open(std::vector<std::string>* events) {
  if (setup_.chat) {
    events->push_back(sse_event(chunk(json{{"index", 0},
                                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                                           {"logprobs", nullptr},
                                           {"finish_reason", nullptr}})));
  } else if (setup_.echo) {
    events->push_back(sse_event(
        chunk(json{{"index", 0}, {"text", setup_.echo_text}, {"logprobs", nullptr}, {"finish_reason", nullptr}})));
  }
}

json OpenAiRenderer::chat_delta(const ChatDelta& d) {
  json delta = json::object();
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : d.tool_calls)
      calls.push_back({{"index", streamed_calls_++},
                       {"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    delta["tool_calls"] = calls;
  }
  return delta;
}

void OpenAiRenderer::step(const GeneratedStep& s, std::vector<std::string>* events) {
  json lp = nullptr;
  if (setup_.logprobs >= 0 && s.entry != nullptr)
    lp = setup_.chat ? chat_logprobs({*s.entry}) : completion_logprobs({*s.entry}, {});
  if (setup_.chat) {
    json delta = chat_delta(s.chat);
    if (!delta.empty() || !lp.is_null())
      events->push_back(
          sse_event(chunk(json{{"index", 0}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", nullptr}})));
  } else {
    events->push_back(
        sse_event(chunk(json{{"index", 0}, {"text", s.text}, {"logprobs", lp}, {"finish_reason", nullptr}})));
  }
}

std::string OpenAiRenderer::finish_reason(const GenerationEnd& end) const {
  // A reply the server's limit cut is a normal end: "length" would tell the
  // client its own max_tokens did, and agents retry with a larger one.
  std::string reason = end.cause == EndCause::kLength ? "length" : "stop";
  if (setup_.chat && !end.tool_calls.empty() && reason == "stop") reason = "tool_calls";
  return reason;
}

json OpenAiRenderer::usage(const GenerationEnd& end) const {
  return json{{"prompt_tokens", end.prompt_tokens},
              {"completion_tokens", end.completion_tokens},
              {"total_tokens", end.prompt_tokens + end.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", end.result.restore.restore_point}}}};
}

void OpenAiRenderer::close(const GeneratedStep& last, const GenerationEnd& end, std::vector<std::string>* events) {
  json closing;
  if (setup_.chat) {
    closing = chunk(json{
        {"index", 0}, {"delta", chat_delta(last.chat)}, {"logprobs", nullptr}, {"finish_reason", finish_reason(end)}});
  } else {
    closing =
        chunk(json{{"index", 0}, {"text", last.text}, {"logprobs", nullptr}, {"finish_reason", finish_reason(end)}});
  }
  closing["usage"] = usage(end);
  closing["seed"] = setup_.seed;
  closing["restore"] = restore_json(end.result.restore);
  closing["speculative"] = speculative_json(end.result.speculative);
  if (end.capped_at > 0) closing["capped_at"] = end.capped_at;
  events->push_back(sse_event(closing));
  if (setup_.include_usage) {
    json tail = closing;
    tail["choices"] = json::array();
    events->push_back(sse_event(tail));
  }
  events->push_back(sse_done());
}

json OpenAiRenderer::completion_logprobs(const std::vector<GeneratedEntry>& entries,
                                         const std::vector<GeneratedEntry>& prompt) const {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (size_t i = 0; i < prompt.size(); ++i) {
    tokens.push_back(backend_.token_bytes(prompt[i].token));
    if (i == 0)
      token_logprobs.push_back(nullptr);
    else
      token_logprobs.push_back(json(prompt[i].logprob));
    top.push_back(nullptr);
    offsets.push_back(prompt[i].text_offset);
  }
  for (const auto& e : entries) {
    tokens.push_back(backend_.token_bytes(e.token));
    token_logprobs.push_back(json(e.logprob));
    json alternatives = json::object();
    for (int k = 0; k < setup_.logprobs && k < static_cast<int>(e.top.size()); ++k)
      alternatives[backend_.token_bytes(e.top[k].token)] = json(e.top[k].logprob);
    top.push_back(std::move(alternatives));
    offsets.push_back(e.text_offset);
  }
  return json{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json OpenAiRenderer::chat_logprobs(const std::vector<GeneratedEntry>& entries) const {
  json content = json::array();
  for (const auto& e : entries) {
    std::string text = backend_.token_bytes(e.token);
    json alternatives = json::array();
    for (int k = 0; k < setup_.logprobs && k < static_cast<int>(e.top.size()); ++k) {
      std::string alt = backend_.token_bytes(e.top[k].token);
      alternatives.push_back({{"token", alt}, {"logprob", json(e.top[k].logprob)}, {"bytes", bytes_array(alt)}});
    }
    content.push_back(
        {{"token", text}, {"logprob", json(e.logprob)}, {"bytes", bytes_array(text)}, {"top_logprobs", alternatives}});
  }
  return json{{"content", content}};
}

json OpenAiRenderer::body(const GenerationEnd& end) {
  json choice = {{"index", 0}, {"logprobs", nullptr}};
  if (setup_.chat) {
    json message = {{"role", "assistant"}, {"content", end.content}};
    if (end.content.empty() && !end.tool_calls.empty()) message["content"] = nullptr;
    if (!end.reasoning.empty()) message["reasoning_content"] = end.reasoning;
    if (!end.tool_calls.empty()) {
      json calls = json::array();
      for (const auto& c : end.tool_calls)
        calls.push_back(
            {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      message["tool_calls"] = calls;
    }
    choice["message"] = message;
    if (setup_.logprobs >= 0) choice["logprobs"] = chat_logprobs(end.entries);
  } else {
    choice["text"] = (setup_.echo ? setup_.echo_text : std::string()) + end.text;
    if (setup_.logprobs >= 0) {
      std::vector<GeneratedEntry> prompt;
      if (setup_.echo) {
        int64_t offset = 0;
        for (size_t i = 0; i < setup_.prompt_ids.size(); ++i) {
          float lp = i < end.result.prompt_logprobs.size() ? end.result.prompt_logprobs[i] : 0.0f;
          prompt.push_back(GeneratedEntry{setup_.prompt_ids[i], lp, {}, offset});
          offset += static_cast<int64_t>(backend_.token_bytes(setup_.prompt_ids[i]).size());
        }
      }
      choice["logprobs"] = completion_logprobs(end.entries, prompt);
    }
  }
  choice["finish_reason"] = finish_reason(end);
  json body = {{"id", setup_.id},
               {"object", setup_.chat ? "chat.completion" : "text_completion"},
               {"created", setup_.created},
               {"model", setup_.model},
               {"choices", json::array({std::move(choice)})},
               {"usage", usage(end)},
               {"seed", setup_.seed},
               {"restore", restore_json(end.result.restore)},
               {"speculative", speculative_json(end.result.speculative)}};
  if (end.capped_at > 0) body["capped_at"] = end.capped_at;
  return body;
}

std::string openai_error_body(const ApiError& e) { return dump_json(e.to_json()); }

const Protocol& openai_protocol(bool chat) {
  static const auto make = [](bool is_chat) {
    Protocol p;
    p.route = is_chat ? "/v1/chat/completions" : "/v1/completions";
    p.prepare = [is_chat](const Backend& backend, const ParseLimits& limits, const CompletionInput& in) {
      CompletionInput with_route = in;
      with_route.chat = is_chat;
      PreparedCompletion out = prepare_completion(backend, limits, with_route);
      out.renderer = std::make_unique<OpenAiRenderer>(backend, out.setup);
      return out;
    };
    p.error_body = openai_error_body;
    p.error_events = [](const ApiError& e) { return std::vector<std::string>{sse_event(e.to_json()), sse_done()}; };
    return p;
  };
  static const Protocol chat_protocol = make(true), completion_protocol = make(false);
  return chat ? chat_protocol : completion_protocol;
}

}  // namespace sb
