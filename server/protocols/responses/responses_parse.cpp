#include "server/protocols/responses/responses_parse.h"

#include <map>
#include <set>
#include <utility>

#include "server/protocols/json_fields.h"

namespace sb {

using json = nlohmann::ordered_json;

namespace {

using namespace json_fields;

const json& need(const json& obj, const char* name, const std::string& at) {
  const json* v = field(obj, name);
  if (!v) fail(at + "." + name, "'" + at + "." + name + "' is required");
  return *v;
}

void require_object(const json& v, const std::string& param) {
  if (!v.is_object()) wrong_type(param, "an object", v);
}

// Each key of `obj` must be one of `known`.
void only_keys(const json& obj, const std::string& at, std::initializer_list<const char*> known) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok) fail(at + "." + shown_key(it.key()), "unsupported field '" + at + "." + shown_key(it.key()) + "'");
  }
}

std::string index(const std::string& at, size_t i) { return at + "[" + std::to_string(i) + "]"; }

// The request's top-level fields: used, a documented no-op, or refused with
// the reason (docs/interface.md).
const std::set<std::string>& known_fields() {
  static const std::set<std::string> k = {
      "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools", "tool_choice",
      "parallel_tool_calls", "reasoning", "text", "stream", "stream_options", "top_logprobs", "include", "store",
      "service_tier", "truncation", "background", "cache_salt", "seed",
      // No-ops on purpose.
      "prompt_cache_key", "prompt_cache_retention", "client_metadata", "metadata", "user", "safety_identifier"};
  return k;
}

const std::map<std::string, std::string>& refused_fields() {
  static const std::map<std::string, std::string> k = {
      {"previous_response_id",
       "'previous_response_id' is not supported: responses are not stored; send the whole "
       "conversation in 'input' (the bank reuses its prefix)"},
      {"conversation", "'conversation' is not supported: conversations are not stored; send the items in 'input'"},
      {"prompt", "'prompt' (stored prompt templates) is not supported; send 'instructions' and 'input'"},
      {"max_tool_calls",
       "'max_tool_calls' (a limit on built-in tool calls) is not supported: there are no built-in "
       "tools; use parallel_tool_calls: false for one function call"},
      {"context_management", "'context_management' is not supported"},
      {"verbosity", "'verbosity' is not supported"}};
  return k;
}

void check_fields(const json& body) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string k = shown_key(it.key());
    auto refused = refused_fields().find(k);
    if (refused != refused_fields().end() && !it.value().is_null()) fail(k, refused->second);
    if (refused == refused_fields().end() && !known_fields().count(k))
      fail(k, "unsupported field '" + k + "' for /v1/responses");
  }
}

// Settings that must keep their one supported value.
void check_settings(const json& body) {
  if (const json* v = field(body, "store"); v && !v->is_boolean()) wrong_type("store", "a boolean", *v);
  if (const json* v = field(body, "store"); v && v->get<bool>())
    fail("store", "stored responses are not supported ('store' must be false)");
  if (const json* v = field(body, "background"); v && !v->is_boolean()) wrong_type("background", "a boolean", *v);
  if (const json* v = field(body, "background"); v && v->get<bool>())
    fail("background", "background responses are not supported ('background' must be false)");
  if (const json* v = field(body, "service_tier")) {
    const std::string& t = as_string(*v, "service_tier");
    if (t != "auto" && t != "default") fail("service_tier", "'service_tier' must be auto or default");
  }
  if (const json* v = field(body, "truncation")) {
    if (as_string(*v, "truncation") != "disabled")
      fail("truncation", "only 'truncation': \"disabled\" is supported (a prompt over the limit is a 413)");
  }
  if (const json* v = field(body, "stream_options")) {
    require_object(*v, "stream_options");
    only_keys(*v, "stream_options", {"include_obfuscation"});
    if (const json* o = field(*v, "include_obfuscation"); o && !o->is_boolean())
      wrong_type("stream_options.include_obfuscation", "a boolean", *o);
  }
  for (const char* name : {"prompt_cache_key", "user", "safety_identifier", "prompt_cache_retention"})
    if (const json* v = field(body, name)) as_string(*v, name);
  for (const char* name : {"metadata", "client_metadata"})
    if (const json* v = field(body, name)) require_object(*v, name);
}

// The conversation as chat messages, with where each came from (for errors).
struct Conversation {
  json messages = json::array();
  std::vector<std::string> origin;  // the Responses path of messages[i]
  std::string pending_reasoning;    // reasoning items waiting for their assistant turn
  std::string reasoning_origin;
  std::set<std::string> call_ids;  // function_call call_ids seen so far

  void add(json m, std::string from) {
    messages.push_back(std::move(m));
    origin.push_back(std::move(from));
  }
  // The assistant message a function_call joins: the last message when it is
  // the assistant's (and no reasoning waits for a new turn), else a new one.
  json& assistant_for_call(const std::string& from) {
    if (pending_reasoning.empty() && !messages.empty() && messages.back()["role"] == "assistant")
      return messages.back();
    add(assistant(""), from);
    return messages.back();
  }
  json assistant(const std::string& content) {
    json m = {{"role", "assistant"}, {"content", content}};
    if (!pending_reasoning.empty()) m["reasoning_content"] = std::exchange(pending_reasoning, "");
    return m;
  }
  // Reasoning that no assistant turn followed is a turn of its own.
  void flush_reasoning() {
    if (pending_reasoning.empty()) return;
    std::string from = reasoning_origin;
    add(assistant(""), from);
  }
};

// Content parts as chat text parts (joined by the chat parser).
json content_parts(const json& v, const std::string& at, bool assistant) {
  if (v.is_string()) return json::array({{{"type", "text"}, {"text", as_text(v, at)}}});
  if (!v.is_array()) wrong_type(at, "a string or an array of content parts", v);
  json parts = json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = index(at, i);
    require_object(v[i], p);
    const std::string& type = as_string(need(v[i], "type", p), p + ".type");
    if (type == "input_text" || type == "output_text") {
      only_keys(v[i], p, {"type", "text", "annotations", "logprobs"});
      parts.push_back({{"type", "text"}, {"text", as_text(need(v[i], "text", p), p + ".text")}});
    } else if (type == "refusal" && assistant) {
      only_keys(v[i], p, {"type", "refusal"});
      parts.push_back({{"type", "text"}, {"text", as_text(need(v[i], "refusal", p), p + ".refusal")}});
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      fail(p + ".type", "'" + type + "' content is not supported: this model reads text only");
    } else {
      fail(p + ".type", "unknown content part type '" + shown_key(type) + "'");
    }
  }
  return parts;
}

void add_message(const json& item, const std::string& at, Conversation* c) {
  only_keys(item, at, {"type", "role", "content", "id", "status"});
  if (const json* id = field(item, "id")) as_string(*id, at + ".id");
  if (const json* st = field(item, "status")) as_string(*st, at + ".status");
  std::string role = as_string(need(item, "role", at), at + ".role");
  if (role == "developer") role = "system";
  if (role != "system" && role != "user" && role != "assistant")
    fail(at + ".role", "'" + at + ".role' must be one of user, assistant, system, developer");
  json content = content_parts(need(item, "content", at), at + ".content", role == "assistant");
  if (role == "assistant") {
    json m = c->assistant("");
    m["content"] = std::move(content);
    c->add(std::move(m), at);
    return;
  }
  c->flush_reasoning();
  c->add(json{{"role", role}, {"content", std::move(content)}}, at);
}

void add_reasoning(const json& item, const std::string& at, Conversation* c) {
  only_keys(item, at, {"type", "id", "summary", "content", "encrypted_content", "status"});
  if (const json* id = field(item, "id")) as_string(*id, at + ".id");
  if (field(item, "encrypted_content"))
    fail(at + ".encrypted_content",
         "encrypted reasoning is not supported: send the reasoning's 'content' "
         "(this server returns it in the clear)");
  // The reasoning itself when given, else its summary.
  std::string text;
  for (const char* key : {"content", "summary"}) {
    const json* parts = field(item, key);
    if (!parts) continue;
    const std::string p = at + "." + key;
    if (!parts->is_array()) wrong_type(p, "an array", *parts);
    std::string joined;
    for (size_t i = 0; i < parts->size(); ++i) {
      const std::string pp = index(p, i);
      require_object((*parts)[i], pp);
      only_keys((*parts)[i], pp, {"type", "text"});
      const std::string& type = as_string(need((*parts)[i], "type", pp), pp + ".type");
      if (type != (std::string(key) == "content" ? "reasoning_text" : "summary_text"))
        fail(pp + ".type",
             "'" + pp + ".type' must be " + (std::string(key) == "content" ? "reasoning_text" : "summary_text"));
      if (!joined.empty()) joined += "\n\n";
      joined += as_text(need((*parts)[i], "text", pp), pp + ".text");
    }
    if (text.empty()) text = joined;
  }
  if (text.empty()) return;  // an empty reasoning item renders as nothing
  if (!c->pending_reasoning.empty())
    c->pending_reasoning += "\n\n";
  else
    c->reasoning_origin = at;
  c->pending_reasoning += text;
}

void add_function_call(const json& item, const std::string& at, Conversation* c) {
  only_keys(item, at, {"type", "id", "call_id", "name", "namespace", "arguments", "status"});
  if (const json* id = field(item, "id")) as_string(*id, at + ".id");
  if (const json* st = field(item, "status")) as_string(*st, at + ".status");
  const std::string& call_id = as_string(need(item, "call_id", at), at + ".call_id");
  std::string name = as_string(need(item, "name", at), at + ".name");
  // A namespaced call is shown as the model wrote it (the tool's flat name).
  if (const json* ns = field(item, "namespace"); ns && !ns->is_null())
    name = namespaced_tool_name(as_string(*ns, at + ".namespace"), name);
  const std::string& arguments = as_text(need(item, "arguments", at), at + ".arguments");
  json& m = c->assistant_for_call(at);
  if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
  m["tool_calls"].push_back(
      {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}});
  c->call_ids.insert(call_id);
}

void add_function_output(const json& item, const std::string& at, Conversation* c) {
  only_keys(item, at, {"type", "id", "call_id", "output", "status", "namespace"});
  if (const json* id = field(item, "id")) as_string(*id, at + ".id");
  if (const json* st = field(item, "status")) as_string(*st, at + ".status");
  const std::string& call_id = as_string(need(item, "call_id", at), at + ".call_id");
  if (!c->call_ids.count(call_id))
    fail(at + ".call_id", "no function_call with call_id '" + shown_key(call_id) + "' comes before " + at);
  c->flush_reasoning();
  json content = content_parts(need(item, "output", at), at + ".output", false);
  c->add(json{{"role", "tool"}, {"content", std::move(content)}, {"tool_call_id", call_id}}, at);
}

void add_item(const json& item, const std::string& at, Conversation* c) {
  require_object(item, at);
  const json* type = field(item, "type");
  // An item without a type is an easy input message ({"role", "content"}).
  const std::string t = type ? as_string(*type, at + ".type") : "message";
  if (t == "message") return add_message(item, at, c);
  if (t == "reasoning") return add_reasoning(item, at, c);
  if (t == "function_call") return add_function_call(item, at, c);
  if (t == "function_call_output") return add_function_output(item, at, c);
  if (t == "item_reference") fail(at + ".type", "'item_reference' needs stored items: send the item itself");
  fail(at + ".type", "input items of type '" + shown_key(t) +
                         "' are not supported (message, reasoning, function_call, "
                         "function_call_output are)");
}

Conversation conversation(const json& body, ResponsesParams* echo) {
  Conversation c;
  if (const json* v = field(body, "instructions")) {
    c.add(json{{"role", "system"}, {"content", as_text(*v, "instructions")}}, "instructions");
    echo->instructions = *v;
  }
  const json* input = field(body, "input");
  if (!input) fail("input", "'input' is required");
  if (input->is_string()) {
    c.add(json{{"role", "user"}, {"content", *input}}, "input");
    return c;
  }
  if (!input->is_array()) wrong_type("input", "a string or an array of items", *input);
  if (input->empty()) fail("input", "'input' must not be empty");
  for (size_t i = 0; i < input->size(); ++i) add_item((*input)[i], index("input", i), &c);
  c.flush_reasoning();
  return c;
}

json function_tool(const json& t, const std::string& p, const std::string& flat_name) {
  only_keys(t, p, {"type", "name", "description", "parameters", "strict"});
  json fn = {{"name", flat_name}};
  if (const json* d = field(t, "description")) fn["description"] = *d;
  if (const json* params = field(t, "parameters")) fn["parameters"] = *params;
  if (const json* st = field(t, "strict")) fn["strict"] = *st;
  return json{{"type", "function"}, {"function", std::move(fn)}};
}

// A tool this server cannot run (web search, file search, computer use, a
// hosted MCP server, ...): left out of the prompt, with a warning, so a client
// that sends one by default still gets its turn (docs/interface.md).
void leave_out(const std::string& type, const std::string& at, ResponsesParams* echo) {
  echo->warnings.push_back(at + ": the built-in tool '" + shown_key(type) +
                           "' does not run on this server; it was left out of the prompt");
}

json function_tools(const json& v, ResponsesParams* echo) {
  if (!v.is_array()) wrong_type("tools", "an array", v);
  json tools = json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = index("tools", i);
    require_object(v[i], p);
    const std::string& type = as_string(need(v[i], "type", p), p + ".type");
    if (type == "function") {
      tools.push_back(function_tool(v[i], p, as_string(need(v[i], "name", p), p + ".name")));
      continue;
    }
    if (type != "namespace") {
      leave_out(type, p, echo);
      continue;
    }
    // A namespace's functions are offered as functions named namespace__name
    // (Codex CLI's own flat spelling); a call comes back split (name, namespace).
    only_keys(v[i], p, {"type", "name", "description", "tools"});
    const std::string& space = as_string(need(v[i], "name", p), p + ".name");
    if (const json* d = field(v[i], "description")) as_string(*d, p + ".description");
    const json& inner = need(v[i], "tools", p);
    if (!inner.is_array()) wrong_type(p + ".tools", "an array", inner);
    for (size_t j = 0; j < inner.size(); ++j) {
      const std::string q = index(p + ".tools", j);
      require_object(inner[j], q);
      const std::string& inner_type = as_string(need(inner[j], "type", q), q + ".type");
      if (inner_type != "function") {
        leave_out(inner_type, q, echo);
        continue;
      }
      const std::string& name = as_string(need(inner[j], "name", q), q + ".name");
      const std::string flat = namespaced_tool_name(space, name);
      echo->namespaced[flat] = {space, name};
      tools.push_back(function_tool(inner[j], q, flat));
    }
  }
  echo->tools = v;
  return tools;
}

json chat_tool_choice(const json& v, ResponsesParams* echo) {
  echo->tool_choice = v;
  if (v.is_string()) return v;  // none, auto, required: checked by the chat parser
  if (!v.is_object()) wrong_type("tool_choice", "a string or an object", v);
  const std::string& type = as_string(need(v, "type", "tool_choice"), "tool_choice.type");
  if (type != "function")
    fail("tool_choice.type", "tool_choice of type '" + shown_key(type) +
                                 "' is not supported (none, auto, required, or "
                                 "{\"type\": \"function\", \"name\": ...})");
  only_keys(v, "tool_choice", {"type", "name"});
  return json{{"type", "function"}, {"function", {{"name", need(v, "name", "tool_choice")}}}};
}

json response_format(const json& text, ResponsesParams* echo) {
  require_object(text, "text");
  only_keys(text, "text", {"format", "verbosity"});
  if (field(text, "verbosity")) fail("text.verbosity", "'text.verbosity' is not supported");
  const json* format = field(text, "format");
  if (!format) return nullptr;
  require_object(*format, "text.format");
  echo->text_format = *format;
  const std::string& type = as_string(need(*format, "type", "text.format"), "text.format.type");
  if (type != "json_schema") {
    only_keys(*format, "text.format", {"type"});
    return json{{"type", type}};  // text, json_object; others refused by the chat parser
  }
  only_keys(*format, "text.format", {"type", "name", "schema", "strict", "description"});
  json schema = json::object();
  for (const char* k : {"name", "schema", "strict", "description"})
    if (const json* v = field(*format, k)) schema[k] = *v;
  return json{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

// reasoning.effort: the thinking switch (docs/interface.md).
void reasoning(const json& v, json* chat, ResponsesParams* echo) {
  require_object(v, "reasoning");
  only_keys(v, "reasoning", {"effort", "summary", "generate_summary"});
  if (const json* e = field(v, "effort")) {
    const std::string& effort = as_string(*e, "reasoning.effort");
    if (effort == "none" || effort == "minimal") {
      (*chat)["chat_template_kwargs"] = {{"enable_thinking", false}};
    } else if (effort == "low" || effort == "medium" || effort == "high" || effort == "xhigh") {
      (*chat)["chat_template_kwargs"] = {{"enable_thinking", true}};
    } else {
      fail("reasoning.effort", "'reasoning.effort' must be none, minimal, low, medium, high or xhigh");
    }
    echo->reasoning_effort = *e;
  }
  for (const char* key : {"summary", "generate_summary"}) {
    const json* s = field(v, key);
    if (!s) continue;
    const std::string p = std::string("reasoning.") + key;
    const std::string& summary = as_string(*s, p);
    if (summary != "auto" && summary != "concise" && summary != "detailed")
      fail(p, "'" + p + "' must be auto, concise or detailed");
    echo->reasoning_summary = true;
  }
}

void include(const json& v, json* chat, ResponsesParams* echo) {
  if (!v.is_array()) wrong_type("include", "an array of strings", v);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string& what = as_string(v[i], index("include", i));
    if (what == "message.output_text.logprobs") {
      echo->output_logprobs = true;
      (*chat)["logprobs"] = true;
    } else if (what != "reasoning.encrypted_content") {
      // Reasoning comes back in the clear, so it round-trips without encryption.
      fail(index("include", i), "include '" + shown_key(what) +
                                    "' is not supported (message.output_text.logprobs "
                                    "and reasoning.encrypted_content are)");
    }
  }
}

// The chat parser's names for fields, in Responses' words.
std::string responses_name(const std::string& chat_name, const std::vector<std::string>& origin) {
  static const std::vector<std::pair<std::string, std::string>> renames = {
      {"max_completion_tokens", "max_output_tokens"},
      {"response_format.json_schema.", "text.format."},
      {"response_format.json_schema", "text.format"},
      {"response_format", "text.format"},
      {"tool_choice.function.name", "tool_choice.name"},
      {"chat_template_kwargs.enable_thinking", "reasoning.effort"},
      {"logprobs", "include"}};
  for (const auto& [from, to] : renames)
    if (chat_name.rfind(from, 0) == 0) return to + chat_name.substr(from.size());
  if (chat_name.rfind("tools[", 0) == 0) {
    std::string s = chat_name;
    if (size_t at = s.find(".function."); at != std::string::npos) s.erase(at, 9);
    return s;
  }
  if (chat_name.rfind("messages[", 0) == 0) {
    const size_t close = chat_name.find(']');
    const size_t i = std::stoul(chat_name.substr(9, close - 9));
    if (i < origin.size()) return origin[i] + chat_name.substr(close + 1);
  }
  if (chat_name == "messages") return "input";
  return chat_name;
}

void rename_in(std::string* text, const std::string& from, const std::string& to) {
  if (from.empty() || from == to) return;
  for (size_t at = text->find(from); at != std::string::npos; at = text->find(from, at + to.size()))
    text->replace(at, from.size(), to);
}

json translate(const json& body, ResponsesParams* echo, std::vector<std::string>* origin) {
  if (!body.is_object()) throw ApiException{bad_request("", "the request body must be a JSON object", "invalid_json")};
  check_fields(body);
  check_settings(body);
  json chat = json::object();
  Conversation c = conversation(body, echo);
  chat["messages"] = std::move(c.messages);
  *origin = std::move(c.origin);
  for (const char* k :
       {"model", "temperature", "top_p", "parallel_tool_calls", "stream", "top_logprobs", "cache_salt", "seed"})
    if (const json* v = field(body, k)) chat[k] = *v;
  if (const json* v = field(body, "max_output_tokens")) {
    chat["max_completion_tokens"] = *v;
    echo->max_output_tokens = *v;
  }
  if (const json* v = field(body, "tools")) chat["tools"] = function_tools(*v, echo);
  if (const json* v = field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*v, echo);
  if (const json* v = field(body, "text")) {
    json format = response_format(*v, echo);
    if (!format.is_null()) chat["response_format"] = std::move(format);
  }
  if (const json* v = field(body, "reasoning")) reasoning(*v, &chat, echo);
  if (const json* v = field(body, "include")) include(*v, &chat, echo);
  if (const json* v = field(body, "top_logprobs"); v && v->is_number() && v->get<double>() > 0) {
    chat["logprobs"] = true;
    echo->output_logprobs = true;
  }
  if (const json* v = field(body, "metadata")) echo->metadata = *v;
  return chat;
}

}  // namespace

std::string namespaced_tool_name(const std::string& space, const std::string& name) {
  size_t end = space.size();
  while (end > 0 && space[end - 1] == '_') --end;
  size_t begin = 0;
  while (begin < name.size() && name[begin] == '_') ++begin;
  return space.substr(0, end) + "__" + name.substr(begin);
}

void ResponsesRequest::rename(ApiError* e) const {
  const std::string renamed = responses_name(e->param, origin);
  rename_in(&e->message, e->param, renamed);
  e->param = renamed;
}

ResponsesRequest translate_responses(const json& body) {
  ResponsesRequest r;
  r.chat_body = translate(body, &r.echo, &r.origin);
  return r;
}

ResponsesParams parse_responses_params(const json& body, const ParseLimits& limits) {
  ResponsesRequest r = translate_responses(body);
  try {
    r.echo.chat = parse_chat_params(r.chat_body, limits);
  } catch (ApiException& e) {
    r.rename(&e.error);
    throw;
  }
  return std::move(r.echo);
}

}  // namespace sb
