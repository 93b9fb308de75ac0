#include "server/protocols/generation.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "server/transport/sse.h"

namespace sb {

using json = ResponseJson;

json restore_json(const RestoreRecord& r, bool operator_view) {
  const MissReason reason =
      operator_view ? operator_miss_reason(r.miss_reason, r.stored_in_other_namespace) : r.miss_reason;
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
         {"prefill_steps", r.prefill_steps},
         {"stored_tokens", r.stored_tokens},
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
              {"paused", r.switched_off},
              {"acceptance_mode", r.acceptance_mode},
              {"row_cost", r.row_cost},
              {"draft_cost", r.draft_cost}};
}

Generation::Generation(const Backend& backend, GenerationSetup setup, std::unique_ptr<ChatOutput> chat_output,
                       std::unique_ptr<Renderer> renderer)
    : setup_(std::move(setup)),
      text_stream_(backend.new_text_stream()),
      chat_output_(std::move(chat_output)),
      renderer_(std::move(renderer)),
      stops_(setup_.stop) {
  if (setup_.echo) text_bytes_ = static_cast<int64_t>(setup_.echo_text.size());
}

void Generation::start_stream(std::vector<std::string>* events) { renderer_->open(events); }

void Generation::absorb(const ChatDelta& d) {
  content_ += d.content;
  reasoning_ += d.reasoning;
  for (const auto& c : d.tool_calls) tool_calls_.push_back(c);
}

bool Generation::on_token(const GeneratedToken& token, std::vector<std::string>* events) {
  if (stopped_early()) return false;
  ++used_;
  if (std::find(setup_.stop_token_ids.begin(), setup_.stop_token_ids.end(), token.token) != setup_.stop_token_ids.end())
    return true;  // the engine ends here by itself; end-of-turn is no text
  entries_.push_back(GeneratedEntry{token.token, token.logprob, token.top, text_bytes_});
  GeneratedStep step{&entries_.back(), stops_.push(text_stream_->push(token.token)), {}};
  text_ += step.text;
  text_bytes_ += static_cast<int64_t>(step.text.size());
  if (setup_.chat) {
    if (chat_output_)
      step.chat = chat_output_->push(step.text);
    else
      step.chat.content = step.text;
  }
  absorb(step.chat);
  if (setup_.stream) renderer_->step(step, events);
  return !stopped_early();
}

void Generation::trim(CompletionResult* result) const {
  if (stopped_early() && result->tokens.size() > used_) result->tokens.resize(used_);
}

GeneratedStep Generation::drain() {
  GeneratedStep last;
  last.text = stops_.push(text_stream_->finish());
  last.text += stops_.finish();
  text_ += last.text;
  text_bytes_ += static_cast<int64_t>(last.text.size());
  if (setup_.chat) {
    if (chat_output_) {
      last.chat = chat_output_->push(last.text);
      ChatDelta tail = chat_output_->finish();
      last.chat.content += tail.content;
      last.chat.reasoning += tail.reasoning;
      for (auto& c : tail.tool_calls) last.chat.tool_calls.push_back(std::move(c));
    } else {
      last.chat.content = last.text;
    }
  }
  return last;
}

GenerationEnd Generation::end(const CompletionResult& result) const {
  EndCause cause = EndCause::kEndOfTurn;
  if (stops_.stopped())
    cause = EndCause::kStopSequence;
  else if (call_limit_reached())
    cause = EndCause::kToolCallLimit;
  else if (result.finish_reason == FinishReason::kLength)
    cause = setup_.max_tokens_capped > 0 ? EndCause::kCapped : EndCause::kLength;
  return GenerationEnd{result,
                       cause,
                       stops_.matched(),
                       text_,
                       content_,
                       reasoning_,
                       tool_calls_,
                       entries_,
                       static_cast<int64_t>(setup_.prompt_ids.size()),
                       static_cast<int64_t>(result.tokens.size()),
                       cause == EndCause::kCapped ? setup_.max_tokens_capped : 0};
}

void Generation::finish_stream(const CompletionResult& result, std::vector<std::string>* events) {
  const GeneratedStep last = drain();
  absorb(last.chat);
  renderer_->close(last, end(result), events);
}

json Generation::response(const CompletionResult& result) {
  absorb(drain().chat);
  return renderer_->body(end(result));
}

}  // namespace sb
