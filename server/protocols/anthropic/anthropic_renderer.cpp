#include "server/protocols/anthropic/anthropic_renderer.h"

#include <cstdio>

#include <algorithm>

#include "server/protocols/anthropic/messages_parse.h"
#include "server/protocols/completion_setup.h"

namespace sb {

using json = ResponseJson;

namespace {

const char* error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

json error_json(const ApiError& e) {
  // Anthropic's error has no `param`: the message names the field.
  std::string message = e.message;
  if (!e.param.empty() && message.find(e.param) == std::string::npos) message = e.param + ": " + message;
  return json{{"type", "error"}, {"error", {{"type", error_type(e.status)}, {"message", message}}}};
}

std::string stop_reason(const GenerationEnd& end) {
  switch (end.cause) {
    case EndCause::kLength:
      return "max_tokens";
    case EndCause::kStopSequence:
      return "stop_sequence";
    case EndCause::kToolCallLimit:
      return "tool_use";
    // The operator's cap ends the turn: "max_tokens" would say the client's
    // own limit was reached, which agents take for a cut-off answer to resume.
    case EndCause::kCapped:
    case EndCause::kEndOfTurn:
      break;
  }
  return end.tool_calls.empty() ? "end_turn" : "tool_use";
}

json stop_sequence(const GenerationEnd& end) {
  return end.cause == EndCause::kStopSequence ? json(end.stop_sequence) : json(nullptr);
}

// A call's arguments as the `input` object (a model that wrote something
// else than an object gets it under "arguments", so nothing is lost).
json tool_input(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (input.is_discarded() || !input.is_object()) return json{{"arguments", arguments}};
  return input;
}

json message_head(const GenerationSetup& setup) {
  return json{{"id", setup.id},           {"type", "message"},      {"role", "assistant"},     {"model", setup.model},
              {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr}};
}

}  // namespace

std::string anthropic_event(const std::string& name, const json& data) {
  return "event: " + name + "\ndata: " + dump_json(data) + "\n\n";
}

std::string anthropic_error_body(const ApiError& e) { return dump_json(error_json(e)); }

json anthropic_usage(const GenerationEnd& end) {
  const RestoreRecord& r = end.result.restore;
  const int64_t read = std::min(r.restore_point, end.prompt_tokens);
  const int64_t created = std::min(r.stored_tokens, end.prompt_tokens - read);
  return json{{"input_tokens", end.prompt_tokens - read - created},
              {"cache_creation_input_tokens", created},
              {"cache_read_input_tokens", read},
              {"output_tokens", end.completion_tokens}};
}

void AnthropicRenderer::open(std::vector<std::string>* events) {
  json message = message_head(setup_);
  // The prompt is known; what the bank held of it is known at the end (message_delta).
  message["usage"] = json{{"input_tokens", static_cast<int64_t>(setup_.prompt_ids.size())},
                          {"cache_creation_input_tokens", 0},
                          {"cache_read_input_tokens", 0},
                          {"output_tokens", 0}};
  events->push_back(anthropic_event("message_start", json{{"type", "message_start"}, {"message", message}}));
  events->push_back(anthropic_event("ping", json{{"type", "ping"}}));
}

void AnthropicRenderer::end_block(std::vector<std::string>* events) {
  if (open_ == Block::kNone) return;
  events->push_back(anthropic_event("content_block_stop", json{{"type", "content_block_stop"}, {"index", index_}}));
  open_ = Block::kNone;
}

void AnthropicRenderer::enter(Block b, std::vector<std::string>* events) {
  if (open_ == b) return;
  end_block(events);
  open_ = b;
  ++index_;
  json block = b == Block::kText ? json{{"type", "text"}, {"text", ""}}
                                 : json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
  events->push_back(anthropic_event(
      "content_block_start", json{{"type", "content_block_start"}, {"index", index_}, {"content_block", block}}));
}

void AnthropicRenderer::step(const GeneratedStep& s, std::vector<std::string>* events) {
  const auto delta = [&](json d) {
    events->push_back(anthropic_event(
        "content_block_delta", json{{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}}));
  };
  if (!s.chat.reasoning.empty()) {
    enter(Block::kThinking, events);
    delta(json{{"type", "thinking_delta"}, {"thinking", s.chat.reasoning}});
  }
  if (!s.chat.content.empty()) {
    enter(Block::kText, events);
    delta(json{{"type", "text_delta"}, {"text", s.chat.content}});
  }
  for (const auto& c : s.chat.tool_calls) {
    end_block(events);
    ++index_;
    events->push_back(anthropic_event(
        "content_block_start",
        json{{"type", "content_block_start"},
             {"index", index_},
             {"content_block", {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", json::object()}}}}));
    delta(json{{"type", "input_json_delta"}, {"partial_json", dump_json(tool_input(c.arguments))}});
    events->push_back(anthropic_event("content_block_stop", json{{"type", "content_block_stop"}, {"index", index_}}));
  }
}

void AnthropicRenderer::close(const GeneratedStep& last, const GenerationEnd& end, std::vector<std::string>* events) {
  step(last, events);
  end_block(events);
  json delta = {{"type", "message_delta"},
                {"delta", {{"stop_reason", stop_reason(end)}, {"stop_sequence", stop_sequence(end)}}},
                {"usage", anthropic_usage(end)},
                {"seed", setup_.seed},
                {"restore", restore_json(end.result.restore)}};
  if (end.capped_at > 0) delta["capped_at"] = end.capped_at;
  if (!warnings_.empty()) delta["warnings"] = warnings_;
  events->push_back(anthropic_event("message_delta", delta));
  events->push_back(anthropic_event("message_stop", json{{"type", "message_stop"}}));
}

json AnthropicRenderer::body(const GenerationEnd& end) {
  json message = message_head(setup_);
  json& content = message["content"];
  if (!end.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", end.reasoning}, {"signature", ""}});
  if (!end.content.empty()) content.push_back({{"type", "text"}, {"text", end.content}});
  for (const auto& c : end.tool_calls)
    content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", tool_input(c.arguments)}});
  message["stop_reason"] = stop_reason(end);
  message["stop_sequence"] = stop_sequence(end);
  message["usage"] = anthropic_usage(end);
  message["seed"] = setup_.seed;
  message["restore"] = restore_json(end.result.restore);
  if (end.capped_at > 0) message["capped_at"] = end.capped_at;
  if (!warnings_.empty()) message["warnings"] = warnings_;
  return message;
}

namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// cache_control: the prompt's tokens up to each marked block, as pins. A
// longer prefix's pin protects every shorter one's blocks (one chain), so
// one pin per TTL is enough: the last breakpoint with it.
std::vector<PinSpec> breakpoint_pins(const Backend& backend, const MessagesParams& params,
                                     const CompletionRequest& request) {
  std::vector<PinSpec> pins;
  for (int64_t ttl : {int64_t{300}, int64_t{3600}}) {
    auto last = std::find_if(params.breakpoints.rbegin(), params.breakpoints.rend(),
                             [ttl](const CacheBreakpoint& b) { return b.ttl_s == ttl; });
    if (last == params.breakpoints.rend()) continue;
    ChatPrompt rendered;
    // A prefix the template cannot render alone (rare) pins nothing; the request goes on.
    if (!backend.render_chat(last->prefix, &rendered)) continue;
    const size_t n = common_prefix(rendered.ids, request.prompt);
    if (n == 0) continue;
    PinSpec pin;
    pin.tokens.assign(request.prompt.begin(), request.prompt.begin() + static_cast<std::ptrdiff_t>(n));
    pin.name_space = request.name_space;
    pin.ttl_s = ttl;
    pins.push_back(std::move(pin));
  }
  return pins;
}

PreparedCompletion prepare_messages(const Backend& backend, const ParseLimits& limits, const CompletionInput& in) {
  const nlohmann::ordered_json body = parse_body(in.body, limits);
  MessagesParams params = parse_messages_params(body, limits);
  PreparedCompletion out = prepare_chat_completion(backend, limits, in, params.chat);
  out.setup.id = "msg_" + in.request_id;
  if (out.request.cache_mode == CacheMode::kDefault) out.pins = breakpoint_pins(backend, params, out.request);
  for (const std::string& w : params.warnings)
    std::fprintf(stderr, "statebank serve: request %s: %s\n", in.request_id.c_str(), w.c_str());
  out.renderer = std::make_unique<AnthropicRenderer>(out.setup, std::move(params.warnings));
  return out;
}

}  // namespace

const Protocol& messages_protocol() {
  static const Protocol protocol = [] {
    Protocol p;
    p.route = "/v1/messages";
    p.prepare = prepare_messages;
    p.error_body = anthropic_error_body;
    p.error_events = [](const ApiError& e) {
      return std::vector<std::string>{anthropic_event("error", error_json(e))};
    };
    return p;
  }();
  return protocol;
}

}  // namespace sb
