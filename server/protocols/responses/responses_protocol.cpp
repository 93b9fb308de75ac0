#include "server/protocols/responses/responses_protocol.h"

#include <cstdio>
#include <memory>
#include <utility>

#include "server/protocols/completion_setup.h"
#include "server/protocols/generation.h"
#include "server/protocols/openai/openai_renderer.h"
#include "server/protocols/responses/responses_output.h"
#include "server/protocols/responses/responses_parse.h"

namespace sb {

using json = ResponseJson;
using ojson = nlohmann::ordered_json;

namespace {

json bytes_array(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

// Generation's steps and ends as ResponsesOutput's deltas.
class ResponsesRenderer : public Renderer {
 public:
  ResponsesRenderer(const Backend& backend, ResponsesSetup setup, int top_logprobs, uint64_t seed)
      : backend_(backend),
        with_logprobs_(setup.output_logprobs),
        top_logprobs_(top_logprobs),
        seed_(seed),
        output_(std::move(setup)) {}

  void open(std::vector<std::string>* events) override { output_.start(events); }
  void step(const GeneratedStep& s, std::vector<std::string>* events) override {
    output_.push(s.chat, s.entry && with_logprobs_ ? logprobs({*s.entry}) : json::array(), events);
  }
  void close(const GeneratedStep& last, const GenerationEnd& end, std::vector<std::string>* events) override {
    output_.push(last.chat, json::array(), events);
    output_.finish(ending(end), events);
  }
  ResponseJson body(const GenerationEnd& end) override {
    ChatDelta whole;
    whole.reasoning = end.reasoning;
    whole.content = end.content;
    whole.tool_calls = end.tool_calls;
    output_.push(whole, with_logprobs_ ? logprobs(end.entries) : json::array(), nullptr);
    return output_.response(ending(end));
  }

 private:
  ResponsesEnd ending(const GenerationEnd& end) const {
    ResponsesEnd e;
    e.input_tokens = end.prompt_tokens;
    e.cached_tokens = end.result.restore.restore_point;
    e.output_tokens = end.completion_tokens;
    e.length = end.cause == EndCause::kLength;
    e.seed = seed_;
    e.restore = restore_json(end.result.restore);
    e.capped_at = end.capped_at;
    return e;
  }
  // OpenAI's log-probability entries: token, logprob, bytes, top_logprobs.
  json logprobs(const std::vector<GeneratedEntry>& entries) const {
    json out = json::array();
    for (const auto& e : entries) {
      const std::string text = backend_.token_bytes(e.token);
      json top = json::array();
      for (int k = 0; k < top_logprobs_ && k < static_cast<int>(e.top.size()); ++k) {
        const std::string alt = backend_.token_bytes(e.top[k].token);
        top.push_back({{"token", alt}, {"logprob", json(e.top[k].logprob)}, {"bytes", bytes_array(alt)}});
      }
      out.push_back(
          {{"token", text}, {"logprob", json(e.logprob)}, {"bytes", bytes_array(text)}, {"top_logprobs", top}});
    }
    return out;
  }

  const Backend& backend_;
  const bool with_logprobs_;
  const int top_logprobs_;
  const uint64_t seed_;
  ResponsesOutput output_;
};

// The echo's fields as they were parsed, converted node by node (never
// printed and parsed again: the body is parsed once).
json to_response_json(const ojson& v) { return json(v); }

// The request's settings as OpenAI's Response object echoes them.
json echo(const ojson& body, const ResponsesParams& p) {
  const auto given = [&](const char* key, ojson dflt) {
    auto it = body.find(key);
    return to_response_json(it == body.end() || it->is_null() ? dflt : *it);
  };
  ojson reasoning = {{"effort", p.reasoning_effort}, {"summary", nullptr}};
  if (auto r = body.find("reasoning"); r != body.end() && r->is_object() && r->contains("summary"))
    reasoning["summary"] = (*r)["summary"];
  return json{{"instructions", to_response_json(p.instructions)},
              {"tools", to_response_json(p.tools)},
              {"tool_choice", to_response_json(p.tool_choice)},
              {"text", {{"format", to_response_json(p.text_format)}}},
              {"reasoning", to_response_json(reasoning)},
              {"parallel_tool_calls", given("parallel_tool_calls", true)},
              {"max_output_tokens", to_response_json(p.max_output_tokens)},
              {"top_logprobs", given("top_logprobs", 0)},
              {"metadata", to_response_json(p.metadata)},
              {"user", given("user", nullptr)}};
}

PreparedCompletion prepare(const Backend& backend, const ParseLimits& limits, const CompletionInput& in) {
  const ojson body = parse_body(in.body, limits);
  const ResponsesRequest request = translate_responses(body);
  CompletionInput chat_in = in;
  chat_in.body = {};
  chat_in.chat = true;
  PreparedCompletion out;
  try {
    out = prepare_parsed_completion(backend, limits, chat_in, request.chat_body);
  } catch (ApiException& e) {
    request.rename(&e.error);
    throw;
  }
  ResponsesSetup setup;
  setup.id = in.request_id;
  setup.model = out.setup.model;
  setup.created_at = out.setup.created;
  setup.stream = out.setup.stream;
  setup.reasoning_summary = request.echo.reasoning_summary;
  setup.output_logprobs = request.echo.output_logprobs;
  // The request's own limit ended the reply only when --max-tokens-cap did not lower it.
  setup.client_limit = !request.echo.max_output_tokens.is_null() &&
                       out.request.max_tokens == request.echo.max_output_tokens.get<int64_t>();
  setup.echo = echo(body, request.echo);
  // What ran: the request's own values, else the model's defaults (--sampling-defaults).
  setup.echo["temperature"] = out.request.sampling.temperature;
  setup.echo["top_p"] = out.request.sampling.top_p;
  setup.namespaced = request.echo.namespaced;
  setup.warnings = request.echo.warnings;
  for (const std::string& w : setup.warnings)
    std::fprintf(stderr, "statebank serve: request %s: %s\n", in.request_id.c_str(), w.c_str());
  out.renderer =
      std::make_unique<ResponsesRenderer>(backend, std::move(setup), std::max(0, out.setup.logprobs), out.setup.seed);
  return out;
}

// A stream ends with one `error` event (the Responses stream's error).
std::vector<std::string> error_events(const ApiError& e) {
  json event = {{"type", "error"},
                {"code", e.code.empty() ? json(nullptr) : json(e.code)},
                {"message", e.message},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)}};
  return {"event: error\n" + sse_event(event)};
}

}  // namespace

const Protocol& responses_protocol() {
  static const Protocol p = [] {
    Protocol r;
    r.route = "/v1/responses";
    r.prepare = prepare;
    r.error_body = openai_error_body;
    r.error_events = error_events;
    return r;
  }();
  return p;
}

}  // namespace sb
