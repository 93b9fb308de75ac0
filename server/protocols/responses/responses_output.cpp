#include "server/protocols/responses/responses_output.h"

#include <utility>

namespace sb {

using json = ResponseJson;

ResponsesOutput::ResponsesOutput(ResponsesSetup setup) : setup_(std::move(setup)) {}

void ResponsesOutput::emit(std::vector<std::string>* events, const std::string& type, json body) {
  if (!setup_.stream || events == nullptr) return;
  body["type"] = type;
  body["sequence_number"] = sequence_++;
  events->push_back("event: " + type + "\n" + sse_event(body));
}

namespace {

std::string item_id(const char* prefix, const std::string& id, size_t index) {
  return std::string(prefix) + id + "_" + std::to_string(index);
}

}  // namespace

json ResponsesOutput::reasoning_item(const char* status) const {
  json item = {{"id", item_id("rs_", setup_.id, items_.size())},
               {"type", "reasoning"},
               {"status", status},
               {"summary", json::array()},
               {"content", json::array()}};
  if (!reasoning_.empty() && std::string(status) == "completed") {
    item["content"].push_back({{"type", "reasoning_text"}, {"text", reasoning_}});
    // No model writes a summary here: the reasoning stands for its own.
    if (setup_.reasoning_summary) item["summary"].push_back({{"type", "summary_text"}, {"text", reasoning_}});
  }
  return item;
}

json ResponsesOutput::message_item(const char* status) const {
  json item = {{"id", item_id("msg_", setup_.id, items_.size())},
               {"type", "message"},
               {"status", status},
               {"role", "assistant"},
               {"content", json::array()}};
  if (std::string(status) == "completed") {
    json part = {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}};
    if (setup_.output_logprobs) part["logprobs"] = logprobs_;
    item["content"].push_back(std::move(part));
  }
  return item;
}

void ResponsesOutput::start(std::vector<std::string>* events) {
  emit(events, "response.created", json{{"response", object("in_progress", nullptr)}});
  emit(events, "response.in_progress", json{{"response", object("in_progress", nullptr)}});
}

void ResponsesOutput::open(Open kind, std::vector<std::string>* events) {
  if (open_ == kind) return;
  close(events);
  open_ = kind;
  const size_t index = items_.size();
  const std::string id = item_id(kind == Open::kReasoning ? "rs_" : "msg_", setup_.id, index);
  emit(events, "response.output_item.added",
       json{{"output_index", index},
            {"item", kind == Open::kReasoning ? reasoning_item("in_progress") : message_item("in_progress")}});
  const json summary_ref = {{"item_id", id}, {"output_index", index}, {"summary_index", 0}};
  if (kind == Open::kReasoning && setup_.reasoning_summary) {
    json added = summary_ref;
    added["part"] = {{"type", "summary_text"}, {"text", ""}};
    emit(events, "response.reasoning_summary_part.added", std::move(added));
  }
  if (kind == Open::kMessage)
    emit(events, "response.content_part.added",
         json{{"item_id", id},
              {"output_index", index},
              {"content_index", 0},
              {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
}

void ResponsesOutput::close(std::vector<std::string>* events) {
  if (open_ == Open::kNone) return;
  const size_t index = items_.size();
  json item = open_ == Open::kReasoning ? reasoning_item("completed") : message_item("completed");
  const json ref = {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}};
  if (open_ == Open::kReasoning) {
    json done = ref;
    done["text"] = reasoning_;
    emit(events, "response.reasoning_text.done", std::move(done));
    if (setup_.reasoning_summary) {
      json summary = {{"item_id", item["id"]}, {"output_index", index}, {"summary_index", 0}, {"text", reasoning_}};
      emit(events, "response.reasoning_summary_text.done", summary);
      summary.erase("text");
      summary["part"] = item["summary"][0];
      emit(events, "response.reasoning_summary_part.done", std::move(summary));
    }
  } else {
    json done = ref;
    done["text"] = text_;
    done["logprobs"] = setup_.output_logprobs ? logprobs_ : json::array();
    emit(events, "response.output_text.done", std::move(done));
    json part = ref;
    part["part"] = item["content"][0];
    emit(events, "response.content_part.done", std::move(part));
  }
  emit(events, "response.output_item.done", json{{"output_index", index}, {"item", item}});
  items_.push_back(std::move(item));
  open_ = Open::kNone;
  reasoning_.clear();
  text_.clear();
  logprobs_ = json::array();
}

void ResponsesOutput::add_call(const GeneratedToolCall& call, std::vector<std::string>* events) {
  close(events);
  const size_t index = items_.size();
  const std::string id = item_id("fc_", setup_.id, index);
  json item = {{"id", id},           {"type", "function_call"}, {"status", "in_progress"},
               {"call_id", call.id}, {"name", call.name},       {"arguments", ""}};
  if (auto ns = setup_.namespaced.find(call.name); ns != setup_.namespaced.end()) {
    item["name"] = ns->second.second;
    item["namespace"] = ns->second.first;
  }
  emit(events, "response.output_item.added", json{{"output_index", index}, {"item", item}});
  // The call was parsed whole: its arguments are one delta.
  emit(events, "response.function_call_arguments.delta",
       json{{"item_id", id}, {"output_index", index}, {"delta", call.arguments}});
  emit(events, "response.function_call_arguments.done",
       json{{"item_id", id}, {"output_index", index}, {"name", item["name"]}, {"arguments", call.arguments}});
  item["status"] = "completed";
  item["arguments"] = call.arguments;
  emit(events, "response.output_item.done", json{{"output_index", index}, {"item", item}});
  items_.push_back(std::move(item));
  ++calls_;
}

void ResponsesOutput::push(const ChatDelta& delta, const json& logprobs, std::vector<std::string>* events) {
  // A token whose text the parser holds back belongs to the text it completes.
  if (setup_.output_logprobs && logprobs.is_array())
    for (const auto& e : logprobs) held_logprobs_.push_back(e);
  if (!delta.reasoning.empty()) {
    if (delta.content.empty()) held_logprobs_ = json::array();  // reasoning has none
    ++reasoning_tokens_;
    open(Open::kReasoning, events);
    reasoning_ += delta.reasoning;
    const std::string id = item_id("rs_", setup_.id, items_.size());
    emit(events, "response.reasoning_text.delta",
         json{{"item_id", id}, {"output_index", items_.size()}, {"content_index", 0}, {"delta", delta.reasoning}});
    // The reasoning is its own summary (no model writes one here): shown as it comes.
    if (setup_.reasoning_summary)
      emit(events, "response.reasoning_summary_text.delta",
           json{{"item_id", id}, {"output_index", items_.size()}, {"summary_index", 0}, {"delta", delta.reasoning}});
  }
  if (!delta.content.empty()) {
    open(Open::kMessage, events);
    text_ += delta.content;
    json lp = std::exchange(held_logprobs_, json::array());
    for (const auto& e : lp) logprobs_.push_back(e);
    emit(events, "response.output_text.delta",
         json{{"item_id", item_id("msg_", setup_.id, items_.size())},
              {"output_index", items_.size()},
              {"content_index", 0},
              {"delta", delta.content},
              {"logprobs", lp}});
  }
  for (const auto& call : delta.tool_calls) add_call(call, events);
  if (!delta.tool_calls.empty()) held_logprobs_ = json::array();
}

json ResponsesOutput::usage(const ResponsesEnd& end) const {
  return json{{"input_tokens", end.input_tokens},
              {"input_tokens_details", {{"cached_tokens", end.cached_tokens}}},
              {"output_tokens", end.output_tokens},
              {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens_}}},
              {"total_tokens", end.input_tokens + end.output_tokens}};
}

json ResponsesOutput::object(const char* status, const ResponsesEnd* end) const {
  json r = setup_.echo;
  r["id"] = "resp_" + setup_.id;
  r["object"] = "response";
  r["created_at"] = setup_.created_at;
  r["status"] = status;
  r["model"] = setup_.model;
  r["background"] = false;
  r["error"] = nullptr;
  r["incomplete_details"] = nullptr;
  r["previous_response_id"] = nullptr;
  r["store"] = false;
  r["truncation"] = "disabled";
  r["service_tier"] = "default";
  r["output"] = json::array();
  r["usage"] = nullptr;
  if (!setup_.warnings.empty()) r["warnings"] = setup_.warnings;
  if (end == nullptr) return r;
  r["output"] = items_;
  if (open_ != Open::kNone)
    r["output"].push_back(open_ == Open::kReasoning ? reasoning_item("completed") : message_item("completed"));
  if (std::string(status) == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  r["usage"] = usage(*end);
  r["seed"] = end->seed;
  r["restore"] = end->restore;
  if (end->capped_at > 0) r["capped_at"] = end->capped_at;
  return r;
}

void ResponsesOutput::finish(const ResponsesEnd& end, std::vector<std::string>* events) {
  close(events);
  const bool incomplete = end.length && setup_.client_limit && calls_ == 0;
  const char* status = incomplete ? "incomplete" : "completed";
  emit(events, incomplete ? "response.incomplete" : "response.completed", json{{"response", object(status, &end)}});
}

json ResponsesOutput::response(const ResponsesEnd& end) const {
  const bool incomplete = end.length && setup_.client_limit && calls_ == 0;
  return object(incomplete ? "incomplete" : "completed", &end);
}

}  // namespace sb
