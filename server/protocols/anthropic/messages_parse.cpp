#include "server/protocols/anthropic/messages_parse.h"

#include <limits>
#include <map>
#include <set>
#include <string>

#include "server/protocols/json_fields.h"

namespace sb {

using json = nlohmann::ordered_json;
using namespace json_fields;

namespace {

constexpr size_t kMaxBreakpoints = 4;  // Anthropic's limit too
const char* kBlockSeparator = "\n\n";

const std::set<std::string>& body_fields() {
  static const std::set<std::string> k = {"model",
                                          "messages",
                                          "max_tokens",
                                          "system",
                                          "stop_sequences",
                                          "temperature",
                                          "top_p",
                                          "top_k",
                                          "stream",
                                          "tools",
                                          "tool_choice",
                                          "thinking",
                                          "metadata" /* no-op */,
                                          "service_tier" /* no-op */,
                                          "context_management" /* no-op */,
                                          "output_config" /* no-op */};
  return k;
}

const std::map<std::string, std::string>& refused_fields() {
  static const std::map<std::string, std::string> k = {
      {"container", "'container' (code execution containers) is not supported"},
      {"mcp_servers", "'mcp_servers' (remote MCP servers) is not supported; run the tools in the client"}};
  return k;
}

void check_keys(const json& obj, const std::string& param, std::initializer_list<const char*> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || it.key() == a;
    if (!ok) {
      const std::string p = param + "." + shown_key(it.key());
      fail(p, "unsupported field '" + p + "'");
    }
  }
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? kBlockSeparator : "") + parts[i];
  return out;
}

// {"type": "ephemeral", "ttl": "5m" | "1h"}: the TTL in seconds.
int64_t cache_ttl(const json& v, const std::string& param) {
  if (!v.is_object()) wrong_type(param, "an object", v);
  check_keys(v, param, {"type", "ttl"});
  const json* type = field(v, "type");
  if (!type || as_string(*type, param + ".type") != "ephemeral")
    fail(param + ".type", "'" + param + ".type' must be ephemeral");
  const json* ttl = field(v, "ttl");
  if (!ttl) return 300;
  const std::string& t = as_string(*ttl, param + ".ttl");
  if (t == "5m") return 300;
  if (t == "1h") return 3600;
  fail(param + ".ttl", "'" + param + ".ttl' must be 5m or 1h");
}

// The conversation as it is built, and a copy of it at each cache_control.
class Builder {
 public:
  Builder(MessagesParams* out, bool keep_billing_header) : out_(out), keep_billing_header_(keep_billing_header) {}

  // The top-level `system`, or a system message in `messages` (Claude Code
  // sends one after the first user message).
  void system(const json& v, const std::string& param);
  void tools(const json& v);
  void message(const json& m, size_t index, bool last);

 private:
  // The block at `param` carries cache_control: the conversation so far,
  // plus `partial` (the message being built, with the blocks up to this one).
  void breakpoint(const json& block, const std::string& param, const json& partial = json());
  std::string text_block(const json& b, const std::string& param);
  void user_blocks(const json& content, const std::string& p);
  void assistant_blocks(const json& content, const std::string& p);
  void tool_result(const json& b, const std::string& param);
  [[noreturn]] void unsupported_block(const std::string& type, const std::string& param);

  MessagesParams* out_;
  const bool keep_billing_header_;
  std::set<std::string> open_tool_uses_;  // ids of the last assistant message's tool_use blocks
};

void Builder::breakpoint(const json& block, const std::string& param, const json& partial) {
  const json* cc = field(block, "cache_control");
  if (!cc) return;
  if (out_->breakpoints.size() >= kMaxBreakpoints)
    fail(param + ".cache_control", "at most " + std::to_string(kMaxBreakpoints) + " blocks may carry cache_control");
  CacheBreakpoint b;
  b.ttl_s = cache_ttl(*cc, param + ".cache_control");
  b.prefix.tools = out_->chat.tools;
  b.prefix.messages = out_->chat.messages;
  if (!partial.is_null()) b.prefix.messages.push_back(partial);
  out_->breakpoints.push_back(std::move(b));
}

[[noreturn]] void Builder::unsupported_block(const std::string& type, const std::string& param) {
  if (type == "image" || type == "document")
    fail(param + ".type", "'" + type + "' blocks are not supported: this server's models read text only");
  fail(param + ".type", "unsupported content block type '" + type.substr(0, 64) + "' at " + param);
}

std::string Builder::text_block(const json& b, const std::string& param) {
  check_keys(b, param, {"type", "text", "cache_control", "citations"});
  const json* t = field(b, "text");
  if (!t) fail(param + ".text", "'" + param + ".text' is required");
  return as_text(*t, param + ".text");
}

const std::string& block_type(const json& b, const std::string& param) {
  if (!b.is_object()) wrong_type(param, "an object", b);
  const json* type = field(b, "type");
  if (!type) fail(param + ".type", "'" + param + ".type' is required");
  return as_string(*type, param + ".type");
}

void Builder::system(const json& v, const std::string& param) {
  if (v.is_string()) {
    out_->chat.messages.push_back({{"role", "system"}, {"content", as_text(v, param)}});
    return;
  }
  if (!v.is_array()) wrong_type(param, "a string or an array of text blocks", v);
  std::vector<std::string> parts;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (block_type(v[i], p) != "text") fail(p + ".type", "system blocks must be text blocks");
    std::string text = text_block(v[i], p);
    if (!keep_billing_header_ && param == "system" && text.rfind(kBillingHeaderPrefix, 0) == 0) continue;
    parts.push_back(std::move(text));
    breakpoint(v[i], p, json{{"role", "system"}, {"content", joined(parts)}});
  }
  if (!parts.empty()) out_->chat.messages.push_back({{"role", "system"}, {"content", joined(parts)}});
}

void Builder::tools(const json& v) {
  if (!v.is_array()) wrong_type("tools", "an array", v);
  std::set<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!v[i].is_object()) wrong_type(p, "an object", v[i]);
    if (const json* t = field(v[i], "type"); t && as_string(*t, p + ".type") != "custom") {
      out_->warnings.push_back(p + ": the server tool '" + shown_key(t->get<std::string>()) +
                               "' does not run on this server; it was left out of the prompt");
      continue;
    }
    check_keys(v[i], p, {"type", "name", "description", "input_schema", "cache_control", "defer_loading"});
    const json* name = field(v[i], "name");
    if (!name) fail(p + ".name", "'" + p + ".name' is required");
    json fn = {{"name", as_string(*name, p + ".name")}};
    if (!names.insert(fn["name"].get<std::string>()).second) fail(p + ".name", "tool names must be unique");
    if (const json* d = field(v[i], "description")) fn["description"] = as_text(*d, p + ".description");
    // defer_loading (load the schema when a tool search finds it): here every tool is in the prompt.
    if (const json* d = field(v[i], "defer_loading")) as_bool(*d, p + ".defer_loading");
    const json* schema = field(v[i], "input_schema");
    if (!schema) fail(p + ".input_schema", "'" + p + ".input_schema' is required");
    if (!schema->is_object()) wrong_type(p + ".input_schema", "an object", *schema);
    fn["parameters"] = *schema;
    out_->chat.tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    // The tools come first in a prompt: a breakpoint here holds them alone.
    if (field(v[i], "cache_control")) {
      const size_t before = out_->breakpoints.size();
      breakpoint(v[i], p);
      out_->breakpoints[before].prefix.messages = json::array();
    }
  }
}

void Builder::tool_result(const json& b, const std::string& p) {
  check_keys(b, p, {"type", "tool_use_id", "content", "is_error", "cache_control"});
  const json* id = field(b, "tool_use_id");
  if (!id) fail(p + ".tool_use_id", "'" + p + ".tool_use_id' is required");
  const std::string& use_id = as_string(*id, p + ".tool_use_id");
  if (!open_tool_uses_.count(use_id))
    fail(p + ".tool_use_id", "tool_result block '" + use_id.substr(0, 64) +
                                 "' has no matching tool_use block in the previous assistant message");
  if (const json* e = field(b, "is_error")) as_bool(*e, p + ".is_error");
  std::string text;
  if (const json* c = field(b, "content")) {
    if (c->is_string()) {
      text = as_text(*c, p + ".content");
    } else if (c->is_array()) {
      std::vector<std::string> parts;
      for (size_t i = 0; i < c->size(); ++i) {
        const std::string cp = p + ".content[" + std::to_string(i) + "]";
        const std::string& type = block_type((*c)[i], cp);
        if (type != "text") unsupported_block(type, cp);
        parts.push_back(text_block((*c)[i], cp));
      }
      text = joined(parts);
    } else {
      wrong_type(p + ".content", "a string or an array of text blocks", *c);
    }
  }
  out_->chat.messages.push_back({{"role", "tool"}, {"content", text}, {"tool_call_id", use_id}});
  breakpoint(b, p);
}

void Builder::user_blocks(const json& content, const std::string& p) {
  std::vector<std::string> texts;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bp = p + "[" + std::to_string(i) + "]";
    const std::string& type = block_type(content[i], bp);
    if (type == "text") {
      texts.push_back(text_block(content[i], bp));
      breakpoint(content[i], bp, json{{"role", "user"}, {"content", joined(texts)}});
    } else if (type == "tool_result") {
      if (!texts.empty()) fail(bp, "tool_result blocks must come before any text in a user message");
      tool_result(content[i], bp);
    } else {
      unsupported_block(type, bp);
    }
  }
  if (!texts.empty() || content.empty()) out_->chat.messages.push_back({{"role", "user"}, {"content", joined(texts)}});
}

void Builder::assistant_blocks(const json& content, const std::string& p) {
  std::vector<std::string> texts, thoughts;
  json calls = json::array();
  const auto partial = [&] {
    json m = {{"role", "assistant"}, {"content", joined(texts)}};
    if (!thoughts.empty()) m["reasoning_content"] = joined(thoughts);
    if (!calls.empty()) m["tool_calls"] = calls;
    return m;
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bp = p + "[" + std::to_string(i) + "]";
    const json& b = content[i];
    const std::string& type = block_type(b, bp);
    if (type == "text") {
      texts.push_back(text_block(b, bp));
    } else if (type == "thinking") {
      check_keys(b, bp, {"type", "thinking", "signature"});
      const json* t = field(b, "thinking");
      if (!t) fail(bp + ".thinking", "'" + bp + ".thinking' is required");
      thoughts.push_back(as_text(*t, bp + ".thinking"));
      if (const json* s = field(b, "signature")) as_text(*s, bp + ".signature");
    } else if (type == "redacted_thinking") {
      check_keys(b, bp, {"type", "data"});  // nothing a template can show
      if (const json* d = field(b, "data")) as_text(*d, bp + ".data");
    } else if (type == "tool_use") {
      check_keys(b, bp, {"type", "id", "name", "input", "cache_control"});
      const json* id = field(b, "id");
      const json* name = field(b, "name");
      const json* input = field(b, "input");
      if (!id) fail(bp + ".id", "'" + bp + ".id' is required");
      if (!name) fail(bp + ".name", "'" + bp + ".name' is required");
      if (!input || !input->is_object()) fail(bp + ".input", "'" + bp + ".input' must be an object");
      const std::string& use_id = as_string(*id, bp + ".id");
      open_tool_uses_.insert(use_id);
      // The object itself, as the template would get it from the text: not
      // dumped here to be parsed again on every render (issue 47).
      calls.push_back({{"type", "function"},
                       {"id", use_id},
                       {"function", {{"name", as_string(*name, bp + ".name")}, {"arguments", *input}}}});
    } else {
      unsupported_block(type, bp);
    }
    breakpoint(b, bp, partial());
  }
  out_->chat.messages.push_back(partial());
}

void Builder::message(const json& m, size_t index, bool last) {
  const std::string p = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) wrong_type(p, "an object", m);
  check_keys(m, p, {"role", "content"});
  const json* role_v = field(m, "role");
  if (!role_v) fail(p + ".role", "'" + p + ".role' is required");
  const std::string& role = as_string(*role_v, p + ".role");
  if (role != "user" && role != "assistant" && role != "system")
    fail(p + ".role", "'" + p + ".role' must be user, assistant or system");
  if (role == "assistant" && last)
    fail(p, "a final assistant message (a prefill to continue) is not supported; end with a user message");
  const json* content = field(m, "content");
  if (!content) fail(p + ".content", "'" + p + ".content' is required");
  const bool user = role == "user";
  if (role == "system") {
    system(*content, p + ".content");
    return;
  }
  if (content->is_string()) {
    out_->chat.messages.push_back({{"role", role}, {"content", as_text(*content, p + ".content")}});
  } else if (!content->is_array()) {
    wrong_type(p + ".content", "a string or an array of content blocks", *content);
  } else if (user) {
    user_blocks(*content, p + ".content");
  } else {
    open_tool_uses_.clear();
    assistant_blocks(*content, p + ".content");
  }
  if (user) open_tool_uses_.clear();  // a tool_use is answered in the very next message
}

void parse_tool_choice(const json& v, ChatParams* p) {
  if (!v.is_object()) wrong_type("tool_choice", "an object", v);
  check_keys(v, "tool_choice", {"type", "name", "disable_parallel_tool_use"});
  const json* type = field(v, "type");
  if (!type) fail("tool_choice.type", "'tool_choice.type' is required");
  const std::string& t = as_string(*type, "tool_choice.type");
  if (const json* d = field(v, "disable_parallel_tool_use"))
    p->parallel_tool_calls = !as_bool(*d, "tool_choice.disable_parallel_tool_use");
  if (t == "auto" || t == "none") {
    p->tool_choice = t;
  } else if (t == "any") {
    if (p->tools.empty()) fail("tool_choice", "tool_choice 'any' needs 'tools'");
    p->tool_choice = "required";
  } else if (t == "tool") {
    const json* name = field(v, "name");
    if (!name) fail("tool_choice.name", "'tool_choice.name' is required");
    p->tool_choice = as_string(*name, "tool_choice.name");
    p->tool_choice_named = true;
    bool known = false;
    for (const auto& tool : p->tools) known |= tool["function"]["name"] == p->tool_choice;
    if (!known) fail("tool_choice.name", "tool_choice names a tool that is not in 'tools'");
  } else {
    fail("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none");
  }
}

void parse_thinking(const json& v, ChatParams* p) {
  if (!v.is_object()) wrong_type("thinking", "an object", v);
  check_keys(v, "thinking", {"type", "budget_tokens", "display"});
  if (const json* d = field(v, "display")) {
    const std::string& shown = as_string(*d, "thinking.display");
    if (shown != "summarized" && shown != "omitted")
      fail("thinking.display", "'thinking.display' must be summarized or omitted");
  }
  const json* type = field(v, "type");
  if (!type) fail("thinking.type", "'thinking.type' is required");
  const std::string& t = as_string(*type, "thinking.type");
  if (const json* b = field(v, "budget_tokens")) as_int(*b, "thinking.budget_tokens", 0, int64_t{1} << 32);
  if (t == "enabled")
    p->enable_thinking = true;
  else if (t == "disabled")
    p->enable_thinking = false;
  else if (t != "adaptive")
    fail("thinking.type", "'thinking.type' must be enabled, disabled or adaptive");
}

void parse_sampling(const json& body, const ParseLimits& limits, bool count_only, ChatParams* p) {
  const json* max_tokens = field(body, "max_tokens");
  if (max_tokens)
    p->max_tokens = as_int(*max_tokens, "max_tokens", 1, kMaxTokensAccepted);
  else if (!count_only)
    fail("max_tokens", "'max_tokens' is required");
  apply_sampling_defaults(limits.sampling_defaults, p);
  if (const json* v = field(body, "temperature"))
    p->sampling.temperature = static_cast<float>(as_number(*v, "temperature", 0.0, 1.0));
  if (const json* v = field(body, "top_p")) {
    const double top_p = as_number(*v, "top_p", 0.0, 1.0);
    if (top_p <= 0.0) fail("top_p", "'top_p' must be greater than 0");
    p->sampling.top_p = static_cast<float>(top_p);
  }
  if (const json* v = field(body, "top_k"))
    p->sampling.top_k = static_cast<int>(as_int(*v, "top_k", 0, std::numeric_limits<int32_t>::max()));
  if (const json* v = field(body, "stop_sequences")) {
    if (!v->is_array()) wrong_type("stop_sequences", "an array of strings", *v);
    if (v->size() > limits.max_stop)
      fail("stop_sequences", "at most " + std::to_string(limits.max_stop) + " stop sequences");
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string& s = as_string((*v)[i], "stop_sequences[" + std::to_string(i) + "]");
      if (!s.empty()) p->stop.push_back(s);
    }
  }
  if (const json* v = field(body, "stream")) p->stream = as_bool(*v, "stream");
}

// The no-op fields still have their types checked.
void check_noops(const json& body) {
  if (const json* v = field(body, "metadata")) {
    if (!v->is_object()) wrong_type("metadata", "an object", *v);
    check_keys(*v, "metadata", {"user_id"});
    if (const json* u = field(*v, "user_id")) as_string(*u, "metadata.user_id");
  }
  if (const json* v = field(body, "service_tier")) {
    const std::string& t = as_string(*v, "service_tier");
    if (t != "auto" && t != "standard_only") fail("service_tier", "'service_tier' must be auto or standard_only");
  }
  for (const char* name : {"context_management", "output_config"})
    if (const json* v = field(body, name); v && !v->is_object()) wrong_type(name, "an object", *v);
}

}  // namespace

MessagesParams parse_messages_params(const json& body, const ParseLimits& limits, bool count_only) {
  if (!body.is_object()) throw ApiException{bad_request("", "the request body must be a JSON object", "invalid_json")};
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string k = shown_key(it.key());
    if (body_fields().count(k)) continue;
    auto refused = refused_fields().find(k);
    fail(k, refused != refused_fields().end() ? refused->second : "unsupported field '" + k + "'");
  }
  MessagesParams out;
  ChatParams& p = out.chat;
  const json* model = field(body, "model");
  if (!model) fail("model", "'model' is required");
  p.model = as_string(*model, "model");
  if (p.model.empty()) fail("model", "'model' must not be empty");
  parse_sampling(body, limits, count_only, &p);
  check_noops(body);
  Builder builder(&out, limits.keep_billing_header);
  // Tools first, then system, then messages: the order of Anthropic's cache prefixes.
  if (const json* v = field(body, "tools")) builder.tools(*v);
  if (const json* v = field(body, "system")) builder.system(*v, "system");
  const json* messages = field(body, "messages");
  if (!messages) fail("messages", "'messages' is required");
  if (!messages->is_array()) wrong_type("messages", "an array", *messages);
  if (messages->empty()) fail("messages", "'messages' must not be empty");
  for (size_t i = 0; i < messages->size(); ++i) builder.message((*messages)[i], i, i + 1 == messages->size());
  if (const json* v = field(body, "tool_choice")) parse_tool_choice(*v, &p);
  if (const json* v = field(body, "thinking")) parse_thinking(*v, &p);
  for (auto& b : out.breakpoints) {
    b.prefix.model = p.model;
    b.prefix.enable_thinking = p.enable_thinking;
  }
  // What the template renders into the prompt, bounded before it renders.
  const size_t bytes = p.messages.dump().size() + p.tools.dump().size(), most = prompt_bytes_limit(limits);
  if (most > 0 && bytes > most)
    throw ApiException{too_large(
        "messages",
        "the prompt's text has " + std::to_string(bytes) + " bytes, more than the limit of " + std::to_string(most),
        "context_length_exceeded")};
  return out;
}

}  // namespace sb
