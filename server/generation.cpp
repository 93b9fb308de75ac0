#include "server/generation.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "server/sse.h"

namespace sb {

using json = ResponseJson;

json restore_json(const RestoreRecord& r, bool operator_view) {
  const MissReason reason = operator_view ? operator_miss_reason(r.miss_reason, r.stored_in_other_namespace) : r.miss_reason;
  json tiers = json::object();
  for (const auto& t : r.tiers) tiers[tier_kind_name(t.tier)] = json{{"objects", t.objects}, {"bytes", t.bytes}};
  json j{{"mode", r.mode.name()},
              {"restore_point", r.restore_point},
              {"matched_tokens", r.matched_tokens},
              {"common_prefix_tokens", r.common_prefix_tokens},
              {"snapshot_position", r.snapshot_position},
              {"blocks", r.blocks},
              {"bytes_read", r.bytes_read},
              {"tiers", tiers},
              {"checks", r.checks},
              {"check_failures", r.check_failures},
              {"prefill_tokens", r.prefill_tokens},
              {"lookup_ms", r.lookup_ms},
              {"restore_ms", r.restore_ms},
              {"prefill_ms", r.prefill_ms},
              {"miss_reason", nullptr}};
  if (reason != MissReason::kNone) j["miss_reason"] = miss_reason_name(reason);
  if (reason == MissReason::kDiverged) j["diverged_at"] = r.diverged_at;
  return j;
}

json speculative_json(const SpeculativeRecord& r) {
  return json{{"mode", r.mode},
              {"decode_steps", r.steps},
              {"decode_tokens", r.tokens},
              {"drafted", r.drafted},
              {"accepted", r.accepted},
              {"acceptance", r.acceptance()},
              {"tokens_per_step", r.tokens_per_step()},
              {"paused", r.switched_off}};
}

namespace {

json bytes_array(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

}  // namespace

Generation::Generation(const Backend& backend, GenerationSetup setup, std::unique_ptr<ChatOutput> chat_output)
    : backend_(backend),
      setup_(std::move(setup)),
      text_stream_(backend.new_text_stream()),
      chat_output_(std::move(chat_output)),
      stops_(setup_.stop) {
  if (setup_.echo) text_bytes_ = static_cast<int64_t>(setup_.echo_text.size());
}

json Generation::chunk(json choice) const {
  return json{{"id", setup_.id},
              {"object", setup_.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", setup_.created},
              {"model", setup_.model},
              {"choices", json::array({std::move(choice)})}};
}

void Generation::start_stream(std::vector<std::string>* events) {
  if (setup_.chat) {
    events->push_back(sse_event(chunk(json{{"index", 0},
                                            {"delta", {{"role", "assistant"}, {"content", ""}}},
                                            {"logprobs", nullptr},
                                            {"finish_reason", nullptr}})));
    sent_role_ = true;
  } else if (setup_.echo) {
    events->push_back(sse_event(
        chunk(json{{"index", 0}, {"text", setup_.echo_text}, {"logprobs", nullptr}, {"finish_reason", nullptr}})));
  }
}

void Generation::absorb(const ChatDelta& d) {
  content_ += d.content;
  reasoning_ += d.reasoning;
  for (const auto& c : d.tool_calls) tool_calls_.push_back(c);
}

json Generation::chat_delta(const ChatDelta& d) {
  json delta = json::object();
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.tool_calls.empty()) {
    json calls = json::array();
    size_t index = tool_calls_.size();  // before absorb
    for (const auto& c : d.tool_calls)
      calls.push_back({{"index", index++},
                       {"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    delta["tool_calls"] = calls;
  }
  absorb(d);
  return delta;
}

bool Generation::on_token(const GeneratedToken& token, std::vector<std::string>* events) {
  if (stopped_early()) return false;
  if (std::find(setup_.stop_token_ids.begin(), setup_.stop_token_ids.end(), token.token) != setup_.stop_token_ids.end())
    return true;  // the engine ends here by itself; end-of-turn is no text
  Entry e{token.token, token.logprob, token.top, text_bytes_};
  entries_.push_back(e);
  std::string emitted = stops_.push(text_stream_->push(token.token));
  text_ += emitted;
  text_bytes_ += static_cast<int64_t>(emitted.size());
  if (!setup_.stream) {
    if (setup_.chat && chat_output_) absorb(chat_output_->push(emitted));
  } else {
    json lp = nullptr;
    if (setup_.logprobs >= 0) lp = setup_.chat ? chat_logprobs({e}) : completion_logprobs({e}, {});
    if (setup_.chat) {
      json delta = chat_output_ ? chat_delta(chat_output_->push(emitted)) : json::object();
      if (!delta.empty() || !lp.is_null())
        events->push_back(
            sse_event(chunk(json{{"index", 0}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", nullptr}})));
    } else {
      events->push_back(sse_event(chunk(json{{"index", 0}, {"text", emitted}, {"logprobs", lp}, {"finish_reason", nullptr}})));
    }
  }
  return !stopped_early();
}

std::string Generation::drain_text() {
  std::string rest = stops_.push(text_stream_->finish());
  rest += stops_.finish();
  text_ += rest;
  text_bytes_ += static_cast<int64_t>(rest.size());
  return rest;
}

std::string Generation::finish_reason(const CompletionResult& result) const {
  std::string reason = !stopped_early() && result.finish_reason == FinishReason::kLength ? "length" : "stop";
  if (setup_.chat && !tool_calls_.empty() && reason == "stop") reason = "tool_calls";
  return reason;
}

json Generation::usage(const CompletionResult& result) const {
  int64_t prompt = static_cast<int64_t>(setup_.prompt_ids.size());
  int64_t completion = static_cast<int64_t>(result.tokens.size());
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", result.restore.restore_point}}}};
}

void Generation::finish_stream(const CompletionResult& result, std::vector<std::string>* events) {
  std::string rest = drain_text();
  json last;
  if (setup_.chat) {
    ChatDelta d;
    if (chat_output_) {
      d = chat_output_->push(rest);
      ChatDelta tail = chat_output_->finish();
      d.content += tail.content;
      d.reasoning += tail.reasoning;
      for (auto& c : tail.tool_calls) d.tool_calls.push_back(std::move(c));
    } else {
      d.content = rest;
    }
    json delta = chat_delta(d);
    last = chunk(json{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish_reason(result)}});
  } else {
    last = chunk(json{{"index", 0}, {"text", rest}, {"logprobs", nullptr}, {"finish_reason", finish_reason(result)}});
  }
  last["usage"] = usage(result);
  last["seed"] = setup_.seed;
  last["restore"] = restore_json(result.restore);
  last["speculative"] = speculative_json(result.speculative);
  events->push_back(sse_event(last));
  if (setup_.include_usage) {
    json tail = last;
    tail["choices"] = json::array();
    events->push_back(sse_event(tail));
  }
  events->push_back(sse_done());
}

json Generation::completion_logprobs(const std::vector<Entry>& entries, const std::vector<Entry>& prompt) const {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (size_t i = 0; i < prompt.size(); ++i) {
    tokens.push_back(backend_.token_bytes(prompt[i].token));
    if (i == 0) token_logprobs.push_back(nullptr);
    else token_logprobs.push_back(json(prompt[i].logprob));
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

json Generation::chat_logprobs(const std::vector<Entry>& entries) const {
  json content = json::array();
  for (const auto& e : entries) {
    std::string text = backend_.token_bytes(e.token);
    json alternatives = json::array();
    for (int k = 0; k < setup_.logprobs && k < static_cast<int>(e.top.size()); ++k) {
      std::string alt = backend_.token_bytes(e.top[k].token);
      alternatives.push_back({{"token", alt}, {"logprob", json(e.top[k].logprob)}, {"bytes", bytes_array(alt)}});
    }
    content.push_back({{"token", text},
                       {"logprob", json(e.logprob)},
                       {"bytes", bytes_array(text)},
                       {"top_logprobs", alternatives}});
  }
  return json{{"content", content}};
}

json Generation::response(const CompletionResult& result) {
  std::string rest = drain_text();
  json choice = {{"index", 0}, {"logprobs", nullptr}};
  if (setup_.chat) {
    if (chat_output_) {
      absorb(chat_output_->push(rest));
      absorb(chat_output_->finish());
    } else {
      content_ = text_;
    }
    json message = {{"role", "assistant"}, {"content", content_}};
    if (content_.empty() && !tool_calls_.empty()) message["content"] = nullptr;
    if (!reasoning_.empty()) message["reasoning_content"] = reasoning_;
    if (!tool_calls_.empty()) {
      json calls = json::array();
      for (const auto& c : tool_calls_)
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      message["tool_calls"] = calls;
    }
    choice["message"] = message;
    if (setup_.logprobs >= 0) choice["logprobs"] = chat_logprobs(entries_);
  } else {
    choice["text"] = (setup_.echo ? setup_.echo_text : std::string()) + text_;
    if (setup_.logprobs >= 0) {
      std::vector<Entry> prompt;
      if (setup_.echo) {
        int64_t offset = 0;
        for (size_t i = 0; i < setup_.prompt_ids.size(); ++i) {
          float lp = i < result.prompt_logprobs.size() ? result.prompt_logprobs[i] : 0.0f;
          prompt.push_back(Entry{setup_.prompt_ids[i], lp, {}, offset});
          offset += static_cast<int64_t>(backend_.token_bytes(setup_.prompt_ids[i]).size());
        }
      }
      choice["logprobs"] = completion_logprobs(entries_, prompt);
    }
  }
  choice["finish_reason"] = finish_reason(result);
  return json{{"id", setup_.id},
              {"object", setup_.chat ? "chat.completion" : "text_completion"},
              {"created", setup_.created},
              {"model", setup_.model},
              {"choices", json::array({std::move(choice)})},
              {"usage", usage(result)},
              {"seed", setup_.seed},
              {"restore", restore_json(result.restore)},
              {"speculative", speculative_json(result.speculative)}};
}

}  // namespace sb
