#include "tokenizer/output_parser.h"

#include "jinja/json_text.h"

namespace sb {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Length of the longest suffix of `s` that is a proper prefix of `tag`: text
// that the next piece could still complete into the tag.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  size_t max = std::min(s.size(), tag.size() - 1);
  for (size_t n = max; n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The JSON-schema type of parameter `param` of function `name`, or "".
std::string schema_type(const ojson& tools, const std::string& name, const std::string& param) {
  if (!tools.is_array()) return "";
  for (const auto& t : tools) {
    const ojson* f = t.contains("function") ? &t["function"] : &t;
    if (!f->is_object() || f->value("name", "") != name) continue;
    if (!f->contains("parameters") || !(*f)["parameters"].is_object()) return "";
    const ojson& props = (*f)["parameters"].value("properties", ojson::object());
    if (!props.is_object() || !props.contains(param) || !props[param].is_object()) return "";
    const ojson& ty = props[param].value("type", ojson());
    if (ty.is_string()) return ty.get<std::string>();
    if (ty.is_array())  // ["string", "null"]: the first non-null type
      for (const auto& x : ty)
        if (x.is_string() && x.get<std::string>() != "null") return x.get<std::string>();
    return "";
  }
  return "";
}

ojson typed_value(const std::string& text, const std::string& type) {
  if (type == "string") return text;
  if (type == "boolean") {
    if (text == "true" || text == "True") return true;
    if (text == "false" || text == "False") return false;
    return text;
  }
  ojson v = ojson::parse(text, nullptr, false);
  if (v.is_discarded()) return text;
  if ((type == "integer" || type == "number") && !v.is_number()) return text;
  if ((type == "object" && !v.is_object()) || (type == "array" && !v.is_array())) return text;
  if (type.empty() && v.is_string()) return text;  // a quoted value stays as written
  return v;
}

}  // namespace

OutputParser::OutputParser(ChatFlavour flavour, bool thinking_opened_in_prompt)
    : flavour_(flavour), state_(thinking_opened_in_prompt ? State::kReasoning : State::kStart) {}

ParsedDelta OutputParser::push(std::string_view text) {
  buf_.append(text);
  ParsedDelta d;
  process(false, &d);
  record(d);
  return d;
}

ParsedDelta OutputParser::finish() {
  ParsedDelta d;
  process(true, &d);
  held_newlines_.clear();
  // Trailing content whitespace is kept, unless it only trails tool calls.
  if (!held_space_.empty() && calls_ == 0) d.content += held_space_;
  held_space_.clear();
  record(d);
  return d;
}

void OutputParser::record(const ParsedDelta& d) {
  total_.content += d.content;
  total_.reasoning_content += d.reasoning_content;
  total_.tool_calls.insert(total_.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
}

void OutputParser::emit_reasoning(std::string_view s, ParsedDelta* out) {
  if (!reasoning_begun_) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    if (s.empty()) return;
    reasoning_begun_ = true;
  }
  size_t end = s.size();
  while (end > 0 && s[end - 1] == '\n') --end;
  if (end > 0) {
    out->reasoning_content += held_newlines_;
    held_newlines_.clear();
    out->reasoning_content.append(s.substr(0, end));
  }
  held_newlines_.append(s.substr(end));
}

void OutputParser::emit_content(std::string_view s, ParsedDelta* out) {
  if (after_think_) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    if (s.empty()) return;
    after_think_ = false;
  }
  size_t end = s.size();
  while (end > 0 && is_space(s[end - 1])) --end;
  if (end > 0) {
    out->content += held_space_;
    held_space_.clear();
    out->content.append(s.substr(0, end));
  }
  held_space_.append(s.substr(end));
}

void OutputParser::process(bool final, ParsedDelta* out) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        size_t ws = 0;
        while (ws < buf_.size() && is_space(buf_[ws])) ++ws;
        std::string_view rest = std::string_view(buf_).substr(ws);
        if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
          buf_.erase(0, ws + kThinkOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!final && kThinkOpen.substr(0, rest.size()) == rest) return;  // could still be <think>
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        size_t at = buf_.find(kThinkClose);
        if (at != std::string::npos) {
          emit_reasoning(std::string_view(buf_).substr(0, at), out);
          held_newlines_.clear();
          buf_.erase(0, at + kThinkClose.size());
          state_ = State::kContent;
          after_think_ = true;
          continue;
        }
        size_t keep = final ? 0 : partial_tag_suffix(buf_, kThinkClose);
        emit_reasoning(std::string_view(buf_).substr(0, buf_.size() - keep), out);
        buf_.erase(0, buf_.size() - keep);
        return;
      }
      case State::kContent: {
        size_t at = buf_.find(kCallOpen);
        if (at != std::string::npos) {
          emit_content(std::string_view(buf_).substr(0, at), out);
          held_space_.clear();  // whitespace before a tool call is layout
          buf_.erase(0, at + kCallOpen.size());
          state_ = State::kToolCall;
          continue;
        }
        size_t keep = final ? 0 : partial_tag_suffix(buf_, kCallOpen);
        emit_content(std::string_view(buf_).substr(0, buf_.size() - keep), out);
        buf_.erase(0, buf_.size() - keep);
        return;
      }
      case State::kToolCall: {
        size_t at = buf_.find(kCallClose);
        if (at == std::string::npos && !final) return;
        std::string body = buf_.substr(0, at == std::string::npos ? buf_.size() : at);
        buf_.erase(0, at == std::string::npos ? buf_.size() : at + kCallClose.size());
        ToolCallDelta call;
        if (parse_call(body, &call)) {
          out->tool_calls.push_back(std::move(call));
          ++calls_;
        } else {
          // Not a call after all: keep the text, tags included.
          emit_content(std::string(kCallOpen) + body + (at == std::string::npos ? "" : std::string(kCallClose)), out);
        }
        state_ = State::kContent;
        if (at == std::string::npos) return;
        continue;
      }
    }
  }
}

bool OutputParser::parse_call(std::string_view body, ToolCallDelta* call) const {
  bool ok = flavour_ == ChatFlavour::kQwen35Xml ? parse_xml_call(body, call) : parse_json_call(body, call);
  // A model may use the other family's form; accept it rather than lose it.
  if (!ok) ok = flavour_ == ChatFlavour::kQwen35Xml ? parse_json_call(body, call) : parse_xml_call(body, call);
  if (!ok) return false;
  call->index = calls_;
  call->id = "call_" + std::to_string(calls_);
  return true;
}

bool OutputParser::parse_json_call(std::string_view body, ToolCallDelta* call) const {
  ojson j = ojson::parse(trim(body), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call->name = j["name"].get<std::string>();
  const ojson args = j.contains("arguments") ? j["arguments"] : ojson::object();
  if (args.is_string())
    call->arguments = args.get<std::string>();
  else if (args.is_object())
    call->arguments = py_json_dumps(args);
  else
    return false;
  return true;
}

bool OutputParser::parse_xml_call(std::string_view body, ToolCallDelta* call) const {
  std::string_view s = trim(body);
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>", kP = "<parameter=", kPEnd = "</parameter>";
  if (s.substr(0, kFn.size()) != kFn) return false;
  size_t gt = s.find('>');
  if (gt == std::string_view::npos) return false;
  std::string name(trim(s.substr(kFn.size(), gt - kFn.size())));
  if (name.empty()) return false;
  s.remove_prefix(gt + 1);
  ojson args = ojson::object();
  for (;;) {
    s = trim(s);
    if (s.empty() || s.substr(0, kFnEnd.size()) == kFnEnd) break;
    if (s.substr(0, kP.size()) != kP) return false;
    size_t pgt = s.find('>');
    if (pgt == std::string_view::npos) return false;
    std::string key(trim(s.substr(kP.size(), pgt - kP.size())));
    s.remove_prefix(pgt + 1);
    size_t end = s.find(kPEnd);
    if (end == std::string_view::npos) return false;
    std::string_view v = s.substr(0, end);
    // The template writes "<parameter=K>\n" + value + "\n</parameter>".
    if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
    if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
    args[key] = typed_value(std::string(v), schema_type(tools_, name, key));
    s.remove_prefix(end + kPEnd.size());
  }
  call->name = std::move(name);
  call->arguments = py_json_dumps(args);
  return true;
}

}  // namespace sb
