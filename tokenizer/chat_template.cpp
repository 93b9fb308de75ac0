#include "tokenizer/chat_template.h"

#include <fstream>
#include <sstream>

#include "common/json_shape.h"

namespace sb {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kTurnStart = "<|im_start|>";
// Stands in for the final user message's content to find where its turn
// starts; nothing a client sends can contain it by accident.
constexpr std::string_view kSentinel = "\x02sb-final-user-message-4e2b9d\x03";

Status read_file(const std::string& path, std::string* out, bool* exists) {
  std::ifstream f(path, std::ios::binary);
  *exists = static_cast<bool>(f);
  if (!f) return Status::ok();
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Status::io_error(path + ": read failed");
  *out = ss.str();
  return Status::ok();
}

}  // namespace

void ChatTemplate::parse_tool_arguments(ojson* messages) {
  for (auto& m : *messages) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      ojson& fn = call["function"];
      if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
      const std::string& text = fn["arguments"].get_ref<const std::string&>();
      // Text a client sent: held to the bounds of a request body
      // (common/json_shape.h) before it is parsed, or given as the text.
      if (!json_shape_within_bounds(json_shape(text))) continue;
      count_json_parse(JsonText::kToolArguments);
      ojson parsed = ojson::parse(text.empty() ? std::string("{}") : text, nullptr, false);
      if (!parsed.is_discarded() && parsed.is_object()) fn["arguments"] = std::move(parsed);
    }
  }
}

namespace {

// bos_token, eos_token, ... of tokenizer_config.json (a string, or an
// object with "content").
ojson special_tokens(const nlohmann::json& cfg) {
  ojson out = ojson::object();
  for (const char* k : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    if (!cfg.contains(k)) continue;
    const auto& v = cfg[k];
    if (v.is_string()) out[k] = v.get<std::string>();
    else if (v.is_object() && v.contains("content") && v["content"].is_string()) out[k] = v["content"].get<std::string>();
  }
  return out;
}
// The chat_template of a tokenizer_config.json: a string, or a list whose
// "default" entry is used.
Status config_template(const nlohmann::json& cfg, const std::string& cfg_path, std::string* src) {
  if (!cfg.contains("chat_template")) return Status::not_found(cfg_path + ": no chat_template");
  const nlohmann::json& ct = cfg["chat_template"];
  if (ct.is_string()) {
    *src = ct.get<std::string>();
  } else if (ct.is_array()) {
    for (const auto& e : ct)
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
        *src = e["template"].get<std::string>();
    if (src->empty()) return Status::corruption(cfg_path + ": chat_template list has no \"default\" template");
  } else {
    return Status::corruption(cfg_path + ": chat_template is neither a string nor a list");
  }
  return Status::ok();
}
}  // namespace

Status ChatTemplate::from_source(std::string_view src, ChatTemplate* out) { return build(src, ojson::object(), out); }

Status ChatTemplate::build(std::string_view src, nlohmann::ordered_json specials, ChatTemplate* out) {
  ChatTemplate t;
  t.special_tokens_ = std::move(specials);
  Status st = jinja::Template::parse(src, &t.template_);
  if (!st) return Status::invalid("chat template: " + st.message());
  t.source_ = std::string(src);
  t.flavour_ = src.find("<function=") != std::string_view::npos ? ChatFlavour::kQwen35Xml : ChatFlavour::kQwen3Json;
  // A template that cannot render the simplest conversation would fail every
  // request: refuse it now.
  RenderedChat probe;
  ojson one = ojson::array({{{"role", "user"}, {"content", "Hello"}}});
  st = t.render(one, nullptr, ChatOptions{}, &probe);
  if (!st) return Status::invalid("chat template fails on a one-message conversation: " + st.message());
  *out = std::move(t);
  return Status::ok();
}

Status ChatTemplate::load(const std::string& model_dir, ChatTemplate* out) {
  std::string src;
  bool exists = false;
  const std::string jinja_path = model_dir + "/chat_template.jinja";
  const std::string cfg_path = model_dir + "/tokenizer_config.json";
  SB_RETURN_IF_ERROR(read_file(jinja_path, &src, &exists));
  bool from_jinja = exists;
  std::string text;
  SB_RETURN_IF_ERROR(read_file(cfg_path, &text, &exists));
  nlohmann::json cfg = nlohmann::json::object();
  if (exists) {
    cfg = nlohmann::json::parse(text, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) return Status::corruption(cfg_path + ": not a JSON object");
  }
  if (!from_jinja) {
    if (!exists) return Status::not_found(cfg_path + ": cannot open (and no chat_template.jinja)");
    SB_RETURN_IF_ERROR(config_template(cfg, cfg_path, &src));
  }
  Status st = build(src, special_tokens(cfg), out);
  if (!st) return Status::invalid((from_jinja ? jinja_path : cfg_path + " (chat_template)") + ": " + st.message());
  return Status::ok();
}

Status ChatTemplate::from_config_json(const std::string& text, const std::string& source, ChatTemplate* out) {
  nlohmann::json cfg = nlohmann::json::parse(text, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object()) return Status::corruption(source + ": not a JSON object");
  std::string src;
  SB_RETURN_IF_ERROR(config_template(cfg, source, &src));
  Status st = build(src, special_tokens(cfg), out);
  if (!st) return Status::invalid(source + " (chat_template): " + st.message());
  return Status::ok();
}

Status ChatTemplate::render_text(const ojson& messages, const ojson& tools, const ChatOptions& options,
                                 std::string* out) const {
  ojson ctx = special_tokens_;
  if (options.kwargs.is_object())
    for (auto it = options.kwargs.begin(); it != options.kwargs.end(); ++it) ctx[it.key()] = it.value();
  ctx["messages"] = messages;
  if (tools.is_array() && !tools.empty()) ctx["tools"] = tools;
  ctx["add_generation_prompt"] = options.add_generation_prompt;
  if (options.enable_thinking) ctx["enable_thinking"] = *options.enable_thinking;
  return template_.render(ctx, out);
}

Status ChatTemplate::render(const ojson& raw_messages, const ojson& tools, const ChatOptions& options,
                            RenderedChat* out) const {
  if (!raw_messages.is_array() || raw_messages.empty()) return Status::invalid("no messages");
  if (!tools.is_null() && !tools.is_array()) return Status::invalid("tools must be an array");
  ojson normalised;
  if (!options.tool_arguments_parsed) {
    normalised = raw_messages;
    parse_tool_arguments(&normalised);
  }
  const ojson& messages = options.tool_arguments_parsed ? raw_messages : normalised;
  RenderedChat r;
  SB_RETURN_IF_ERROR(render_text(messages, tools, options, &r.text));

  // The final user turn: render again with a sentinel for its content; the
  // turn starts at the last "<|im_start|>" before the sentinel, provided the
  // two texts agree up to there.
  size_t last_user = messages.size();
  for (size_t i = messages.size(); i-- > 0;)
    if (messages[i].is_object() && messages[i].value("role", "") == "user") {
      last_user = i;
      break;
    }
  if (last_user < messages.size()) {
    ojson marked = messages;
    marked[last_user]["content"] = std::string(kSentinel);
    std::string probe;
    if (render_text(marked, tools, options, &probe).is_ok()) {
      size_t at = probe.find(kSentinel);
      size_t turn = at == std::string::npos ? std::string::npos : probe.rfind(kTurnStart, at);
      if (turn != std::string::npos && turn <= r.text.size() && r.text.compare(0, turn, probe, 0, turn) == 0 &&
          r.text.compare(turn, kTurnStart.size(), kTurnStart) == 0)
        r.final_user_offset = turn;
    }
  }
  if (options.add_generation_prompt) {
    size_t turn = r.text.rfind(kTurnStart);
    std::string_view tail = std::string_view(r.text).substr(turn == std::string::npos ? 0 : turn);
    size_t open = tail.rfind("<think>");
    r.opens_thinking = open != std::string_view::npos && tail.find("</think>", open) == std::string_view::npos;
  }
  *out = std::move(r);
  return Status::ok();
}

ojson ChatTemplate::to_json(const std::vector<ChatMessage>& messages) {
  ojson out = ojson::array();
  for (const ChatMessage& m : messages) {
    ojson j = {{"role", m.role}, {"content", m.content}};
    if (m.reasoning_content) j["reasoning_content"] = *m.reasoning_content;
    if (!m.tool_calls.empty()) {
      ojson calls = ojson::array();
      for (const ToolCall& c : m.tool_calls)
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      j["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    out.push_back(std::move(j));
  }
  return out;
}

Status ChatTemplate::render(const std::vector<ChatMessage>& messages, const ojson& tools, const ChatOptions& options,
                            RenderedChat* out) const {
  return render(to_json(messages), tools, options, out);
}

}  // namespace sb
