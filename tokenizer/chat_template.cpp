#include "tokenizer/chat_template.h"

#include <fstream>
#include <sstream>

#include "tokenizer/py_json.h"

namespace sb {

namespace {

using ojson = nlohmann::ordered_json;

// The tools preambles of the two families, as their templates print them.
// load() prefers the text found in the checkpoint's own template (see
// extract_tools_preamble) and falls back to these.
constexpr std::string_view kJsonToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kJsonToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";
constexpr std::string_view kXmlToolsHead = "# Tools\n\nYou have access to the following functions:\n\n<tools>";
constexpr std::string_view kXmlToolsTail =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested "
    "within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the function call, "
    "but NOT after\n- If there is no function call available, answer the question like normal with your current "
    "knowledge and do not tell the user about function calls\n</IMPORTANT>";

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";

// Python str.isspace() for the characters str.strip() removes.
bool py_space_at(std::string_view s, size_t i, size_t* len) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) {
    *len = 1;
    return true;
  }
  static constexpr std::string_view kMulti[] = {
      "\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82", "\xE2\x80\x83",
      "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89",
      "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
  for (std::string_view m : kMulti)
    if (s.substr(i, m.size()) == m) {
      *len = m.size();
      return true;
    }
  return false;
}

// Jinja's `trim` (Python str.strip()).
std::string py_strip(std::string_view s) {
  size_t b = 0, len = 0;
  while (b < s.size() && py_space_at(s, b, &len)) b += len;
  size_t e = s.size();
  while (e > b) {
    // Walk back to the start of the last character.
    size_t k = e - 1;
    while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    if (!py_space_at(s, k, &len) || k + len != e) break;
    e = k;
  }
  return std::string(s.substr(b, e - b));
}

std::string lstrip_nl(std::string_view s) {
  size_t b = s.find_first_not_of('\n');
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b));
}
std::string rstrip_nl(std::string_view s) {
  size_t e = s.find_last_not_of('\n');
  return e == std::string_view::npos ? std::string() : std::string(s.substr(0, e + 1));
}
std::string strip_nl(std::string_view s) { return lstrip_nl(rstrip_nl(s)); }

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) { return s.substr(0, s.find(sep)); }
std::string_view after_last(std::string_view s, std::string_view sep) {
  size_t p = s.rfind(sep);
  return p == std::string_view::npos ? s : s.substr(p + sep.size());
}

// The Qwen templates' reasoning split of an assistant content that embeds
// "<think>R</think>C": reasoning = content.split('</think>')[0].rstrip('\n')
// .split('<think>')[-1].lstrip('\n'), content = content.split('</think>')[-1]
// .lstrip('\n').
void split_think(std::string_view content, std::string* reasoning, std::string* rest) {
  *reasoning = lstrip_nl(after_last(rstrip_nl(before_first(content, "</think>")), "<think>"));
  *rest = lstrip_nl(after_last(content, "</think>"));
}

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

// Parses a Jinja output expression holding one string literal, {{- '...' }},
// starting at src[*pos] (after optional whitespace). On success stores the
// literal's value and moves *pos past the expression.
bool literal_expression(std::string_view src, size_t* pos, std::string* value) {
  size_t p = *pos;
  auto skip_ws = [&] {
    while (p < src.size() && (src[p] == ' ' || src[p] == '\n' || src[p] == '\t' || src[p] == '\r')) ++p;
  };
  skip_ws();
  if (src.substr(p, 2) != "{{") return false;
  p += 2;
  if (p < src.size() && (src[p] == '-' || src[p] == '+')) ++p;
  skip_ws();
  if (p >= src.size() || (src[p] != '\'' && src[p] != '"')) return false;
  char q = src[p++];
  std::string v;
  while (p < src.size() && src[p] != q) {
    if (src[p] == '\\' && p + 1 < src.size()) {
      char e = src[p + 1];
      switch (e) {
        case 'n': v += '\n'; break;
        case 't': v += '\t'; break;
        case 'r': v += '\r'; break;
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        default: v += '\\'; v += e;
      }
      p += 2;
    } else {
      v += src[p++];
    }
  }
  if (p >= src.size()) return false;
  ++p;
  skip_ws();
  if (p < src.size() && src[p] == '-') ++p;
  if (src.substr(p, 2) != "}}") return false;
  *pos = p + 2;
  *value = std::move(v);
  return true;
}

// Finds the checkpoint's own tools preamble: the literal output that starts
// with "# Tools", and the literal outputs right after the loop that prints the
// tools. False when the template is not laid out that way.
bool extract_tools_preamble(std::string_view src, std::string* head, std::string* tail) {
  for (size_t at = src.find("{{"); at != std::string_view::npos; at = src.find("{{", at + 2)) {
    size_t p = at;
    std::string v;
    if (!literal_expression(src, &p, &v) || !starts_with(v, "# Tools")) continue;
    size_t endfor = src.find("endfor", p);
    if (endfor == std::string_view::npos) return false;
    size_t close = src.find("%}", endfor);
    if (close == std::string_view::npos) return false;
    p = close + 2;
    std::string t, piece;
    while (literal_expression(src, &p, &piece)) t += piece;
    if (t.empty() || !starts_with(t, "\n</tools>")) return false;
    *head = v;
    *tail = t;
    return true;
  }
  return false;
}

}  // namespace

Status ChatTemplate::from_source(std::string_view src, ChatTemplate* out) {
  ChatTemplate t;
  if (src.find("<|im_start|>") == std::string_view::npos)
    return Status::unsupported("chat template is not a ChatML (Qwen) template");
  t.flavour_ = src.find("<function=") != std::string_view::npos ? ChatFlavour::kQwen35Xml : ChatFlavour::kQwen3Json;
  t.renders_reasoning_ = src.find("reasoning_content") != std::string_view::npos;
  bool when_false = src.find("enable_thinking is false") != std::string_view::npos;
  bool when_true = src.find("enable_thinking is true") != std::string_view::npos;
  bool open_literal = src.find("'<think>\\n' }}") != std::string_view::npos;
  if (src.find("'<|im_start|>assistant\\n<think>\\n'") != std::string_view::npos)
    t.thinking_ = ThinkingPrompt::kAlwaysOpen;
  else if (when_true)
    t.thinking_ = ThinkingPrompt::kOpenWhenEnabled;
  else if (when_false && open_literal)
    t.thinking_ = ThinkingPrompt::kOpenByDefault;
  else if (when_false)
    t.thinking_ = ThinkingPrompt::kEmptyWhenDisabled;
  else
    t.thinking_ = ThinkingPrompt::kNone;
  std::string head, tail;
  if (extract_tools_preamble(src, &head, &tail)) {
    t.tools_head_ = head;
    t.tools_tail_ = tail;
  } else if (t.flavour_ == ChatFlavour::kQwen35Xml) {
    t.tools_head_ = kXmlToolsHead;
    t.tools_tail_ = kXmlToolsTail;
  } else {
    t.tools_head_ = kJsonToolsHead;
    t.tools_tail_ = kJsonToolsTail;
  }
  *out = std::move(t);
  return Status::ok();
}

Status ChatTemplate::load(const std::string& model_dir, ChatTemplate* out) {
  std::string src;
  bool exists = false;
  std::string jinja_path = model_dir + "/chat_template.jinja";
  SB_RETURN_IF_ERROR(read_file(jinja_path, &src, &exists));
  if (exists) {
    Status st = from_source(src, out);
    return st.is_ok() ? st : Status(st.code() == Code::kUnsupported ? Status::unsupported(jinja_path + ": " + st.message())
                                                                     : st);
  }
  std::string cfg_path = model_dir + "/tokenizer_config.json";
  std::string text;
  SB_RETURN_IF_ERROR(read_file(cfg_path, &text, &exists));
  if (!exists) return Status::not_found(cfg_path + ": cannot open (and no chat_template.jinja)");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::corruption(cfg_path + ": not a JSON object");
  if (!j.contains("chat_template")) return Status::not_found(cfg_path + ": no chat_template");
  const nlohmann::json& ct = j["chat_template"];
  if (ct.is_string()) {
    src = ct.get<std::string>();
  } else if (ct.is_array()) {
    for (const auto& e : ct)
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
        src = e["template"].get<std::string>();
    if (src.empty()) return Status::corruption(cfg_path + ": chat_template list has no \"default\" template");
  } else {
    return Status::corruption(cfg_path + ": chat_template is neither a string nor a list");
  }
  Status st = from_source(src, out);
  if (!st) return Status::unsupported(cfg_path + ": " + st.message());
  return Status::ok();
}

bool ChatTemplate::thinking_default() const {
  switch (thinking_) {
    case ThinkingPrompt::kNone:
    case ThinkingPrompt::kOpenWhenEnabled:
      return false;
    default:
      return true;
  }
}

bool ChatTemplate::prompt_opens_thinking(bool enable_thinking) const {
  switch (thinking_) {
    case ThinkingPrompt::kAlwaysOpen:
      return true;
    case ThinkingPrompt::kOpenByDefault:
    case ThinkingPrompt::kOpenWhenEnabled:
      return enable_thinking;
    default:
      return false;
  }
}

Status ChatTemplate::render(const std::vector<ChatMessage>& messages, const ojson& tools, bool add_generation_prompt,
                            bool enable_thinking, RenderedChat* out) const {
  if (messages.empty()) return Status::invalid("no messages");
  if (!tools.is_null() && !tools.is_array()) return Status::invalid("tools must be an array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      return Status::invalid("message " + std::to_string(i) + " has unsupported role '" + r + "'");
  }
  RenderedChat r;
  SB_RETURN_IF_ERROR(flavour_ == ChatFlavour::kQwen35Xml ? render_xml(messages, tools, &r)
                                                         : render_json(messages, tools, &r));
  if (add_generation_prompt) {
    r.text += "<|im_start|>assistant\n";
    switch (thinking_) {
      case ThinkingPrompt::kNone:
        break;
      case ThinkingPrompt::kEmptyWhenDisabled:
        if (!enable_thinking) r.text += "<think>\n\n</think>\n\n";
        break;
      case ThinkingPrompt::kOpenByDefault:
      case ThinkingPrompt::kOpenWhenEnabled:
        r.text += enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n";
        break;
      case ThinkingPrompt::kAlwaysOpen:
        r.text += "<think>\n";
        break;
    }
  }
  *out = std::move(r);
  return Status::ok();
}

// Mirrors the Qwen3 / Qwen3-Next template.
Status ChatTemplate::render_json(const std::vector<ChatMessage>& m, const ojson& tools, RenderedChat* out) const {
  std::string& s = out->text;
  const size_t n = m.size();
  bool has_tools = tools.is_array() && !tools.empty();
  if (has_tools) {
    s += "<|im_start|>system\n";
    if (m[0].role == "system") s += m[0].content + "\n\n";
    s += tools_head_;
    for (const auto& t : tools) s += "\n" + py_json_dumps(t);
    s += tools_tail_;
  } else if (m[0].role == "system") {
    s += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";
  }
  // The last user message that is not a wrapped tool response.
  size_t last_query = n - 1;
  for (size_t k = n; k-- > 0;) {
    const std::string& c = m[k].content;
    if (m[k].role == "user" && !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "user" || (msg.role == "system" && i != 0)) {
      if (msg.role == "user") out->final_user_offset = s.size();
      s += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
    } else if (msg.role == "assistant") {
      std::string content = msg.content, reasoning;
      if (msg.reasoning_content) {
        reasoning = *msg.reasoning_content;
      } else if (renders_reasoning_ && msg.content.find("</think>") != std::string::npos) {
        split_think(msg.content, &reasoning, &content);
      }
      if (renders_reasoning_ && i > last_query && (i == n - 1 || !reasoning.empty())) {
        s += "<|im_start|>assistant\n<think>\n" + strip_nl(reasoning) + "\n</think>\n\n" + lstrip_nl(content);
      } else {
        s += "<|im_start|>assistant\n" + content;
      }
      for (size_t k = 0; k < msg.tool_calls.size(); ++k) {
        const ToolCall& tc = msg.tool_calls[k];
        if ((k == 0 && !content.empty()) || k > 0) s += "\n";
        s += "<tool_call>\n{\"name\": \"" + tc.name + "\", \"arguments\": " + tc.arguments + "}\n</tool_call>";
      }
      s += "<|im_end|>\n";
    } else if (msg.role == "tool") {
      if (i == 0 || m[i - 1].role != "tool") s += "<|im_start|>user";
      s += "\n<tool_response>\n" + msg.content + "\n</tool_response>";
      if (i == n - 1 || m[i + 1].role != "tool") s += "<|im_end|>\n";
    }
  }
  return Status::ok();
}

// Mirrors the Qwen3.5 template.
Status ChatTemplate::render_xml(const std::vector<ChatMessage>& m, const ojson& tools, RenderedChat* out) const {
  std::string& s = out->text;
  const size_t n = m.size();
  bool has_tools = tools.is_array() && !tools.empty();
  if (has_tools) {
    s += "<|im_start|>system\n";
    s += tools_head_;
    for (const auto& t : tools) s += "\n" + py_json_dumps(t);
    s += tools_tail_;
    if (m[0].role == "system") {
      std::string c = py_strip(m[0].content);
      if (!c.empty()) s += "\n\n" + c;
    }
    s += "<|im_end|>\n";
  } else if (m[0].role == "system") {
    s += "<|im_start|>system\n" + py_strip(m[0].content) + "<|im_end|>\n";
  }
  size_t last_query = n;  // n: none found
  for (size_t k = n; k-- > 0;) {
    if (m[k].role != "user") continue;
    std::string c = py_strip(m[k].content);
    if (!(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  if (last_query == n) return Status::invalid("no user query found in messages");
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& msg = m[i];
    std::string content = py_strip(msg.content);
    if (msg.role == "system") {
      if (i != 0) return Status::invalid("a system message must be at the beginning (message " + std::to_string(i) + ")");
    } else if (msg.role == "user") {
      out->final_user_offset = s.size();
      s += "<|im_start|>user\n" + content + "<|im_end|>\n";
    } else if (msg.role == "assistant") {
      std::string reasoning;
      if (msg.reasoning_content) {
        reasoning = *msg.reasoning_content;
      } else if (content.find("</think>") != std::string::npos) {
        std::string rest;
        split_think(content, &reasoning, &rest);
        content = rest;
      }
      reasoning = py_strip(reasoning);
      if (i > last_query) {
        s += "<|im_start|>assistant\n<think>\n" + reasoning + "\n</think>\n\n" + content;
      } else {
        s += "<|im_start|>assistant\n" + content;
      }
      for (size_t k = 0; k < msg.tool_calls.size(); ++k) {
        const ToolCall& tc = msg.tool_calls[k];
        if (k == 0)
          s += py_strip(content).empty() ? "<tool_call>\n<function=" : "\n\n<tool_call>\n<function=";
        else
          s += "\n<tool_call>\n<function=";
        s += tc.name + ">\n";
        ojson args = ojson::object();
        if (!tc.arguments.empty()) {
          args = ojson::parse(tc.arguments, nullptr, false);
          if (args.is_discarded() || !args.is_object())
            return Status::invalid("arguments of tool call '" + tc.name + "' (message " + std::to_string(i) +
                                   ") are not a JSON object");
        }
        for (auto it = args.begin(); it != args.end(); ++it) {
          const ojson& v = it.value();
          s += "<parameter=" + it.key() + ">\n";
          s += (v.is_object() || v.is_array()) ? py_json_dumps(v) : py_str(v);
          s += "\n</parameter>\n";
        }
        s += "</function>\n</tool_call>";
      }
      s += "<|im_end|>\n";
    } else if (msg.role == "tool") {
      if (i > 0 && m[i - 1].role != "tool") s += "<|im_start|>user";
      s += "\n<tool_response>\n" + content + "\n</tool_response>";
      if (i == n - 1 || m[i + 1].role != "tool") s += "<|im_end|>\n";
    }
  }
  return Status::ok();
}

}  // namespace sb
