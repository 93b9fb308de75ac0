#include "server/chat_output.h"

#include <nlohmann/json.hpp>

namespace sb {

namespace {

const std::string kThinkOpen = "<think>", kThinkClose = "</think>";
const std::string kToolOpen = "<tool_call>", kToolClose = "</tool_call>";

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_suffix(const std::string& s, const std::string& tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, tag, 0, n) == 0) return n;
  return 0;
}

}  // namespace

QwenChatOutput::QwenChatOutput(bool thinking_open, std::string call_id_prefix)
    : where_(thinking_open ? Where::kThink : Where::kContent),
      call_id_prefix_(std::move(call_id_prefix)),
      trim_leading_(thinking_open) {}

void QwenChatOutput::emit(Where where, const std::string& text, ChatDelta* d) {
  std::string t = text;
  if (trim_leading_) {
    size_t i = t.find_first_not_of('\n');
    if (i == std::string::npos) return;  // still only newlines: keep trimming
    t.erase(0, i);
    trim_leading_ = false;
  }
  if (t.empty()) return;
  if (where == Where::kThink) {
    // Trailing newlines may be the frame of "</think>": show them only once
    // more reasoning follows.
    size_t last = t.find_last_not_of('\n');
    if (last == std::string::npos) {
      held_newlines_ += t;
      return;
    }
    d->reasoning += held_newlines_ + t.substr(0, last + 1);
    held_newlines_ = t.substr(last + 1);
  } else {
    d->content += t;
  }
}

ChatDelta QwenChatOutput::push(const std::string& text) {
  buf_ += text;
  ChatDelta d;
  for (;;) {
    if (where_ == Where::kTool) {
      size_t at = buf_.find(kToolClose);
      if (at == std::string::npos) return d;  // a call is shown whole or not at all
      std::string body = buf_.substr(0, at);
      buf_.erase(0, at + kToolClose.size());
      where_ = Where::kContent;
      auto call = nlohmann::json::parse(body, nullptr, false);
      if (call.is_object() && call.contains("name") && call["name"].is_string()) {
        nlohmann::json args = call.contains("arguments") ? call["arguments"] : nlohmann::json::object();
        std::string arguments = args.is_string() ? args.get<std::string>()
                                                 : args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        d.tool_calls.push_back(
            GeneratedToolCall{call_id_prefix_ + std::to_string(calls_++), call["name"].get<std::string>(), arguments});
        trim_leading_ = true;
      } else {
        emit(Where::kContent, kToolOpen + body + kToolClose, &d);
      }
      continue;
    }
    const std::string& close = kThinkClose;
    if (where_ == Where::kThink) {
      size_t at = buf_.find(close);
      if (at == std::string::npos) {
        size_t keep = partial_suffix(buf_, close);
        emit(Where::kThink, buf_.substr(0, buf_.size() - keep), &d);
        buf_.erase(0, buf_.size() - keep);
        return d;
      }
      emit(Where::kThink, buf_.substr(0, at), &d);
      held_newlines_.clear();
      buf_.erase(0, at + close.size());
      where_ = Where::kContent;
      trim_leading_ = true;
      continue;
    }
    // Content: look for the next opening tag.
    size_t think = buf_.find(kThinkOpen), tool = buf_.find(kToolOpen);
    size_t at = std::min(think, tool);
    if (at == std::string::npos) {
      size_t keep = std::max(partial_suffix(buf_, kThinkOpen), partial_suffix(buf_, kToolOpen));
      emit(Where::kContent, buf_.substr(0, buf_.size() - keep), &d);
      buf_.erase(0, buf_.size() - keep);
      return d;
    }
    emit(Where::kContent, buf_.substr(0, at), &d);
    if (at == think) {
      buf_.erase(0, at + kThinkOpen.size());
      where_ = Where::kThink;
      trim_leading_ = true;
    } else {
      buf_.erase(0, at + kToolOpen.size());
      where_ = Where::kTool;
    }
  }
}

ChatDelta QwenChatOutput::finish() {
  ChatDelta d;
  // Whatever is left was cut off (max_tokens): show it as it stands.
  if (where_ == Where::kTool) {
    d.content += kToolOpen + buf_;
  } else if (where_ == Where::kThink) {
    d.reasoning += held_newlines_ + buf_;
  } else {
    d.content += buf_;
  }
  buf_.clear();
  held_newlines_.clear();
  return d;
}

}  // namespace sb
