#include "server/protocols/request_parse.h"

#include "common/json_shape.h"
#include "server/protocols/json_fields.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace sb {

using json = nlohmann::ordered_json;

namespace {

using namespace json_fields;

// The OpenAI request fields accepted here: each is used, or a documented no-op
// (user, metadata, prompt_cache_key, safety_identifier). refused_fields() gives
// the reason for the ones refused; a field OpenAI does not define is refused too.
const std::set<std::string>& common_fields() {
  static const std::set<std::string> k = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "stream", "stream_options",
      "seed", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "logprobs",
      "response_format", "cache_salt", "speculative", "user" /* no-op */};
  return k;
}

const std::set<std::string>& chat_fields() {
  static const std::set<std::string> k = {
      "messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
      "chat_template_kwargs", "metadata" /* no-op */, "store", "service_tier", "prompt_cache_key" /* no-op */,
      "safety_identifier" /* no-op */, "modalities"};
  return k;
}

const std::set<std::string>& completion_fields() {
  static const std::set<std::string> k = {"prompt", "echo", "best_of", "suffix"};
  return k;
}

const std::map<std::string, std::string>& refused_fields() {
  static const std::map<std::string, std::string> k = {
      {"functions", "the deprecated 'functions' is not supported; send 'tools'"},
      {"function_call", "the deprecated 'function_call' is not supported; send 'tool_choice'"},
      {"audio", "'audio' (audio output) is not supported"},
      {"prediction", "'prediction' (predicted outputs) is not supported"},
      {"web_search_options", "'web_search_options' (web search) is not supported"},
      {"reasoning_effort", "'reasoning_effort' is not supported; use chat_template_kwargs.enable_thinking"},
      {"verbosity", "'verbosity' is not supported"}};
  return k;
}

void check_fields(const json& body, bool chat) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string k = shown_key(it.key());
    if (common_fields().count(k) || (chat ? chat_fields() : completion_fields()).count(k)) continue;
    auto refused = refused_fields().find(k);
    if (refused != refused_fields().end()) fail(k, refused->second);
    fail(k, "unsupported field '" + k + "'" + (chat ? "" : " for /v1/completions"));
  }
}

void parse_response_format(const json& v, CommonParams* p) {
  if (!v.is_object()) wrong_type("response_format", "an object", v);
  const json* type = field(v, "type");
  if (!type) fail("response_format.type", "'response_format.type' is required");
  const std::string& t = as_string(*type, "response_format.type");
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key() != "type" && !(t == "json_schema" && it.key() == "json_schema"))
      fail("response_format." + it.key(), "unsupported field 'response_format." + it.key() + "'");
  if (t == "text") return;
  if (t == "json_object") {
    p->response_grammar = constrain::Grammar::any_json_object();
    return;
  }
  if (t != "json_schema") fail("response_format.type", "'response_format.type' must be text, json_object or json_schema");
  const json* js = field(v, "json_schema");
  if (!js) fail("response_format.json_schema", "'response_format.json_schema' is required");
  if (!js->is_object()) wrong_type("response_format.json_schema", "an object", *js);
  for (auto it = js->begin(); it != js->end(); ++it)
    if (it.key() != "name" && it.key() != "schema" && it.key() != "strict" && it.key() != "description")
      fail("response_format.json_schema." + it.key(), "unsupported field 'response_format.json_schema." + it.key() + "'");
  if (const json* n = field(*js, "name")) as_string(*n, "response_format.json_schema.name");
  if (const json* st = field(*js, "strict")) as_bool(*st, "response_format.json_schema.strict");
  const json* schema = field(*js, "schema");
  if (!schema) fail("response_format.json_schema.schema", "'response_format.json_schema.schema' is required");
  std::shared_ptr<constrain::Grammar> g;
  Status s = constrain::Grammar::from_json_schema(*schema, "response_format.json_schema.schema", &g);
  if (!s) {
    // The message starts with the JSON path of what is refused.
    std::string param = s.message().substr(0, s.message().find(':'));
    throw ApiException{bad_request(param, s.message(), "unsupported_schema")};
  }
  p->response_grammar = std::move(g);
}

// `speculative: {mode, draft_max, acceptance}`: statebank's own field; with
// exact acceptance speculation never changes a token, so it is a setting of
// speed alone; rejection keeps the distribution, not the bits.
void parse_speculative(const json& v, bool has_mtp, SpeculativeParams* out) {
  if (!v.is_object()) wrong_type("speculative", "an object {mode, draft_max, acceptance}", v);
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key() != "mode" && it.key() != "draft_max" && it.key() != "acceptance")
      fail("speculative." + shown_key(it.key()), "unsupported field 'speculative." + shown_key(it.key()) +
                                                     "' (speculative takes mode, draft_max and acceptance)");
  if (const json* a = field(v, "acceptance")) {
    const std::string name = as_string(*a, "speculative.acceptance");
    SpeculativeAcceptance acceptance;
    if (!parse_speculative_acceptance(name, &acceptance))
      fail("speculative.acceptance", "speculative.acceptance must be one of " + std::string(kSpeculativeAcceptances) +
                                         ", not '" + shown_key(name) + "'");
    out->acceptance = acceptance;
  }
  if (const json* m = field(v, "mode")) {
    const std::string name = as_string(*m, "speculative.mode");
    SpeculativeMode mode;
    if (!parse_speculative_mode(name, &mode))
      fail("speculative.mode",
           "speculative.mode must be one of " + std::string(kSpeculativeModes) + ", not '" + shown_key(name) + "'");
    const Status s = check_speculative(mode, 1, has_mtp);
    if (!s) fail("speculative.mode", s.message());
    out->mode = mode;
  }
  if (const json* d = field(v, "draft_max"))
    out->draft_max = static_cast<int>(as_int(*d, "speculative.draft_max", 1, kMaxDraftTokens));
}

float penalty(const json& body, const char* name, double lo, double hi, float dflt) {
  const json* v = field(body, name);
  return v ? static_cast<float>(as_number(*v, name, lo, hi)) : dflt;
}

void parse_common(const json& body, const ParseLimits& limits, CommonParams* p) {
  if (!body.is_object()) throw ApiException{bad_request("", "the request body must be a JSON object", "invalid_json")};
  if (const json* v = field(body, "model")) p->model = as_string(*v, "model");
  apply_sampling_defaults(limits.sampling_defaults, p);
  if (const json* v = field(body, "temperature")) p->sampling.temperature = static_cast<float>(as_number(*v, "temperature", 0.0, 2.0));
  if (const json* v = field(body, "top_p")) {
    double top_p = as_number(*v, "top_p", 0.0, 1.0);
    if (top_p <= 0.0) fail("top_p", "'top_p' must be greater than 0");
    p->sampling.top_p = static_cast<float>(top_p);
  }
  if (const json* v = field(body, "top_k")) {
    int64_t k = as_int(*v, "top_k", -1, std::numeric_limits<int32_t>::max());
    p->sampling.top_k = k < 0 ? 0 : static_cast<int>(k);  // -1 means off, as in other servers
  }
  if (const json* v = field(body, "min_p")) p->sampling.min_p = static_cast<float>(as_number(*v, "min_p", 0.0, 1.0));
  p->presence_penalty = penalty(body, "presence_penalty", -2.0, 2.0, p->presence_penalty);
  p->frequency_penalty = penalty(body, "frequency_penalty", -2.0, 2.0, 0.0f);
  p->repetition_penalty = penalty(body, "repetition_penalty", 0.0, 2.0, p->repetition_penalty);
  if (p->repetition_penalty <= 0.0f) fail("repetition_penalty", "'repetition_penalty' must be greater than 0");
  if (const json* v = field(body, "logit_bias")) {
    if (!v->is_object()) wrong_type("logit_bias", "an object mapping token ids to biases", *v);
    for (auto it = v->begin(); it != v->end(); ++it) {
      std::string param = "logit_bias." + shown_key(it.key());
      char* end = nullptr;
      long long id = std::strtoll(it.key().c_str(), &end, 10);
      if (it.key().empty() || *end != '\0' || id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size))
        throw ApiException{bad_request(param, "logit_bias key '" + shown_key(it.key()) + "' is not a token id of this model",
                                       "invalid_token_id")};
      p->logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(as_number(it.value(), param, -100.0, 100.0)));
    }
  }
  if (const json* v = field(body, "response_format")) parse_response_format(*v, p);
  if (const json* v = field(body, "seed")) {
    p->seed_given = true;
    if (v->is_number_unsigned()) {
      p->sampling.seed = v->get<uint64_t>();
    } else {
      p->sampling.seed = static_cast<uint64_t>(
          as_int(*v, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    }
  }
  if (const json* v = field(body, "n")) {
    if (as_int(*v, "n", 1, 128) != 1) fail("n", "only n = 1 is supported; send one request per choice");
  }
  if (const json* v = field(body, "stop")) {
    if (v->is_string()) {
      if (!as_string(*v, "stop").empty()) p->stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      if (v->size() > limits.max_stop) fail("stop", "at most " + std::to_string(limits.max_stop) + " stop sequences");
      for (size_t i = 0; i < v->size(); ++i) {
        const std::string& s = as_string((*v)[i], "stop[" + std::to_string(i) + "]");
        if (!s.empty()) p->stop.push_back(s);
      }
    } else {
      wrong_type("stop", "a string or an array of strings", *v);
    }
  }
  if (const json* v = field(body, "stream")) p->stream = as_bool(*v, "stream");
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) wrong_type("stream_options", "an object", *v);
    for (auto it = v->begin(); it != v->end(); ++it)
      if (it.key() != "include_usage")
        fail("stream_options." + it.key(), "unsupported field 'stream_options." + it.key() + "'");
    if (const json* u = field(*v, "include_usage")) p->include_usage = as_bool(*u, "stream_options.include_usage");
  }
  if (const json* v = field(body, "cache_salt")) {
    p->cache_salt = as_string(*v, "cache_salt");
    p->has_cache_salt = true;
  }
  if (const json* v = field(body, "speculative")) parse_speculative(*v, limits.has_mtp, &p->speculative);
  // Accepted as no-ops, but still strings of a bounded length.
  for (const char* name : {"user", "prompt_cache_key", "safety_identifier"})
    if (const json* v = field(body, name)) as_string(*v, name);
}

int32_t token_id(const json& v, const std::string& param, const ParseLimits& limits) {
  if (!v.is_number_integer() && !v.is_number_unsigned()) wrong_type(param, "an integer token id", v);
  int64_t hi = limits.vocab_size > 0 ? limits.vocab_size - 1 : std::numeric_limits<int32_t>::max();
  if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(hi) : (v.get<int64_t>() < 0 || v.get<int64_t>() > hi))
    throw ApiException{bad_request(param, "token id " + v.dump() + " is outside the vocabulary [0, " + std::to_string(hi) + "]",
                                   "invalid_token_id")};
  return static_cast<int32_t>(v.get<int64_t>());
}

void check_prompt_length(int64_t n, const ParseLimits& limits, const char* param) {
  if (limits.max_prompt_tokens > 0 && n > limits.max_prompt_tokens)
    throw ApiException{too_large(param, "the prompt has " + std::to_string(n) + " tokens, more than the limit of " +
                                            std::to_string(limits.max_prompt_tokens),
                                 "context_length_exceeded")};
}

// Before tokenisation: text beyond prompt_bytes_limit() cannot fit in the
// prompt limit, and tokenising it would cost an HTTP thread seconds.
void check_prompt_bytes(size_t n, const ParseLimits& limits, const char* param) {
  const size_t most = prompt_bytes_limit(limits);
  if (most > 0 && n > most)
    throw ApiException{too_large(param, "the prompt's text has " + std::to_string(n) + " bytes, more than the limit of " +
                                            std::to_string(most) + " (" + std::to_string(kPromptBytesPerToken) +
                                            " bytes per token of the prompt limit)",
                                 "context_length_exceeded")};
}

void parse_prompt(const json& v, const ParseLimits& limits, CompletionParams* p) {
  if (v.is_string()) {
    p->prompt_is_text = true;
    const std::string& text = as_text(v, "prompt");
    if (text.empty()) fail("prompt", "'prompt' must not be empty");
    check_prompt_bytes(text.size(), limits, "prompt");
    p->prompt_text = text;
    return;
  }
  if (!v.is_array()) wrong_type("prompt", "a string or an array of token ids", v);
  if (v.empty()) fail("prompt", "'prompt' must not be empty");
  // A batch of one ("prompt": ["text"] or [[1,2,3]]) is the same prompt.
  if (v[0].is_string() || v[0].is_array()) {
    if (v.size() != 1) fail("prompt", "batched prompts are not supported; send one prompt per request");
    parse_prompt(v[0], limits, p);
    return;
  }
  p->prompt_is_text = false;
  p->prompt_ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) p->prompt_ids.push_back(token_id(v[i], "prompt[" + std::to_string(i) + "]", limits));
  check_prompt_length(static_cast<int64_t>(p->prompt_ids.size()), limits, "prompt");
}

// Content is a string or an array of {"type":"text","text":...} parts.
std::string message_content(const json& v, const std::string& param) {
  if (v.is_string()) return as_text(v, param);
  if (!v.is_array()) wrong_type(param, "a string or an array of text parts", v);
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string part = param + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) wrong_type(part, "an object", v[i]);
    const json* type = field(v[i], "type");
    if (!type) fail(part + ".type", "'" + part + ".type' is required");
    if (as_string(*type, part + ".type") != "text") fail(part + ".type", "only text content parts are supported");
    const json* t = field(v[i], "text");
    if (!t) fail(part + ".text", "'" + part + ".text' is required");
    text += as_text(*t, part + ".text");
  }
  return text;
}

json parse_tool_calls(const json& v, const std::string& param) {
  if (!v.is_array()) wrong_type(param, "an array", v);
  json out = json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = param + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) wrong_type(p, "an object", v[i]);
    json call = {{"type", "function"}};
    if (const json* id = field(v[i], "id")) call["id"] = as_string(*id, p + ".id");
    const json* fn = field(v[i], "function");
    if (!fn) fail(p + ".function", "'" + p + ".function' is required");
    if (!fn->is_object()) wrong_type(p + ".function", "an object", *fn);
    const json* name = field(*fn, "name");
    if (!name) fail(p + ".function.name", "'" + p + ".function.name' is required");
    json arguments = "{}";
    if (const json* a = field(*fn, "arguments")) {
      // OpenAI sends arguments as a JSON string; accept an object as well,
      // kept as the object (the template takes it as it is: printing it
      // here would have it parsed again at the render, issue 47).
      arguments = a->is_object() ? *a : json(as_text(*a, p + ".function.arguments"));
    }
    call["function"] = {{"name", as_string(*name, p + ".function.name")}, {"arguments", std::move(arguments)}};
    out.push_back(std::move(call));
  }
  return out;
}

json parse_message(const json& m, size_t index) {
  std::string p = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) wrong_type(p, "an object", m);
  const json* role_v = field(m, "role");
  if (!role_v) fail(p + ".role", "'" + p + ".role' is required");
  std::string role = as_string(*role_v, p + ".role");
  if (role == "developer") role = "system";
  if (role != "system" && role != "user" && role != "assistant" && role != "tool")
    fail(p + ".role", "'" + p + ".role' must be one of system, user, assistant, tool");
  json out = {{"role", role}};
  const json* content = field(m, "content");
  const json* tool_calls = role == "assistant" ? field(m, "tool_calls") : nullptr;
  if (content) {
    out["content"] = message_content(*content, p + ".content");
  } else if (role == "assistant" && tool_calls) {
    out["content"] = "";
  } else {
    fail(p + ".content", "'" + p + ".content' is required");
  }
  if (role == "assistant") {
    if (const json* r = field(m, "reasoning_content")) out["reasoning_content"] = as_text(*r, p + ".reasoning_content");
    if (tool_calls) out["tool_calls"] = parse_tool_calls(*tool_calls, p + ".tool_calls");
  }
  if (role == "tool") {
    if (const json* id = field(m, "tool_call_id")) out["tool_call_id"] = as_string(*id, p + ".tool_call_id");
  }
  if (const json* name = field(m, "name")) out["name"] = as_string(*name, p + ".name");
  return out;
}

json parse_tools(const json& v) {
  if (!v.is_array()) wrong_type("tools", "an array", v);
  json out = json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = "tools[" + std::to_string(i) + "]";
    if (!v[i].is_object()) wrong_type(p, "an object", v[i]);
    if (const json* t = field(v[i], "type"); t && as_string(*t, p + ".type") != "function")
      fail(p + ".type", "only tools of type 'function' are supported");
    const json* fn = field(v[i], "function");
    if (!fn) fail(p + ".function", "'" + p + ".function' is required");
    if (!fn->is_object()) wrong_type(p + ".function", "an object", *fn);
    const json* name = field(*fn, "name");
    if (!name) fail(p + ".function.name", "'" + p + ".function.name' is required");
    for (auto it = v[i].begin(); it != v[i].end(); ++it)
      if (it.key() != "type" && it.key() != "function") fail(p + "." + it.key(), "unsupported field '" + p + "." + it.key() + "'");
    for (auto it = fn->begin(); it != fn->end(); ++it)
      if (it.key() != "name" && it.key() != "description" && it.key() != "parameters" && it.key() != "strict")
        fail(p + ".function." + it.key(), "unsupported field '" + p + ".function." + it.key() + "'");
    json f = {{"name", as_string(*name, p + ".function.name")}};
    if (const json* d = field(*fn, "description")) f["description"] = as_text(*d, p + ".function.description");
    if (const json* st = field(*fn, "strict")) as_bool(*st, p + ".function.strict");
    if (const json* params = field(*fn, "parameters")) {
      if (!params->is_object()) wrong_type(p + ".function.parameters", "an object", *params);
      f["parameters"] = *params;
    }
    out.push_back({{"type", "function"}, {"function", f}});
  }
  return out;
}

}  // namespace

size_t prompt_bytes_limit(const ParseLimits& limits) {
  return limits.max_prompt_tokens > 0 ? static_cast<size_t>(limits.max_prompt_tokens) * kPromptBytesPerToken : 0;
}

int json_nesting_depth(std::string_view body) { return json_shape(body).depth; }

json parse_body(std::string_view body, const ParseLimits& limits) {
  const JsonShape shape = json_shape(body);
  if (shape.depth > limits.max_json_depth)
    throw ApiException{bad_request("", "the JSON body nests deeper than " + std::to_string(limits.max_json_depth) + " levels",
                                   "json_too_deep")};
  // Refused before parsing: ordered_json inserts each key by a linear search.
  if (shape.most_keys > limits.max_json_object_keys)
    throw ApiException{bad_request("", "an object in the JSON body has " + std::to_string(shape.most_keys) +
                                           " keys, more than the limit of " + std::to_string(limits.max_json_object_keys),
                                   "json_too_many_keys")};
  if (shape.keys > limits.max_json_keys)
    throw ApiException{bad_request("", "the JSON body has " + std::to_string(shape.keys) +
                                           " keys in all, more than the limit of " + std::to_string(limits.max_json_keys),
                                   "json_too_many_keys")};
  count_json_parse(JsonText::kBody);
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    // Parse again with exceptions for the position in the message.
    count_json_parse(JsonText::kBody);
    try {
      json again = json::parse(body);
      (void)again;
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond a double
      throw ApiException{bad_request("", std::string("the body is not valid JSON: ") + e.what(), "invalid_json")};
    }
    throw ApiException{bad_request("", "the body is not valid JSON", "invalid_json")};
  }
  if (!parsed.is_object()) throw ApiException{bad_request("", "the request body must be a JSON object", "invalid_json")};
  return parsed;
}

void apply_sampling_defaults(const SamplingDefaults& d, CommonParams* p) {
  if (d.temperature) p->sampling.temperature = *d.temperature;
  if (d.top_p) p->sampling.top_p = *d.top_p;
  if (d.top_k) p->sampling.top_k = *d.top_k;
  if (d.min_p) p->sampling.min_p = *d.min_p;
  if (d.repetition_penalty) p->repetition_penalty = *d.repetition_penalty;
  if (d.presence_penalty) p->presence_penalty = *d.presence_penalty;
}

CompletionParams parse_completion_params(const json& body, const ParseLimits& limits) {
  CompletionParams p;
  if (body.is_object()) check_fields(body, false);
  parse_common(body, limits, &p);
  if (const json* v = field(body, "best_of")) {
    if (as_int(*v, "best_of", 1, 128) != 1) fail("best_of", "only best_of = 1 is supported");
  }
  if (const json* v = field(body, "suffix")) {
    if (!as_string(*v, "suffix").empty()) fail("suffix", "'suffix' (insertion) is not supported");
  }
  const json* prompt = field(body, "prompt");
  if (!prompt) fail("prompt", "'prompt' is required");
  parse_prompt(*prompt, limits, &p);
  if (const json* v = field(body, "max_tokens")) p.max_tokens = as_int(*v, "max_tokens", 1, kMaxTokensAccepted);
  if (const json* v = field(body, "logprobs")) {
    // OpenAI's legacy field is an integer; a boolean true means 0 alternatives.
    if (v->is_boolean()) p.logprobs = v->get<bool>() ? 0 : -1;
    else p.logprobs = static_cast<int>(as_int(*v, "logprobs", 0, 20));
  }
  if (const json* v = field(body, "echo")) p.echo = as_bool(*v, "echo");
  return p;
}

ChatParams parse_chat_params(const json& body, const ParseLimits& limits) {
  ChatParams p;
  if (body.is_object()) check_fields(body, true);
  parse_common(body, limits, &p);
  if (const json* v = field(body, "store")) {
    if (as_bool(*v, "store")) fail("store", "stored completions are not supported ('store' must be false)");
  }
  if (const json* v = field(body, "service_tier")) {
    const std::string& t = as_string(*v, "service_tier");
    if (t != "auto" && t != "default") fail("service_tier", "'service_tier' must be auto or default");
  }
  if (const json* v = field(body, "modalities")) {
    if (!v->is_array() || v->size() != 1 || (*v)[0] != "text") fail("modalities", "only 'modalities': [\"text\"] is supported");
  }
  if (const json* v = field(body, "metadata")) {
    if (!v->is_object()) wrong_type("metadata", "an object", *v);
  }
  if (const json* v = field(body, "parallel_tool_calls")) p.parallel_tool_calls = as_bool(*v, "parallel_tool_calls");
  p.max_tokens = std::min(limits.default_chat_max_tokens, limits.max_tokens_limit);
  if (const json* v = field(body, "max_tokens")) p.max_tokens = as_int(*v, "max_tokens", 1, kMaxTokensAccepted);
  if (const json* v = field(body, "max_completion_tokens"))
    p.max_tokens = as_int(*v, "max_completion_tokens", 1, kMaxTokensAccepted);
  const json* messages = field(body, "messages");
  if (!messages) fail("messages", "'messages' is required");
  if (!messages->is_array()) wrong_type("messages", "an array", *messages);
  if (messages->empty()) fail("messages", "'messages' must not be empty");
  for (size_t i = 0; i < messages->size(); ++i) p.messages.push_back(parse_message((*messages)[i], i));
  if (const json* v = field(body, "tools")) p.tools = parse_tools(*v);
  if (const json* v = field(body, "tool_choice")) {
    if (v->is_string()) {
      p.tool_choice = as_string(*v, "tool_choice");
      if (p.tool_choice != "none" && p.tool_choice != "auto" && p.tool_choice != "required")
        fail("tool_choice", "'tool_choice' must be none, auto, required or a function");
    } else if (v->is_object()) {
      if (const json* t = field(*v, "type"); t && as_string(*t, "tool_choice.type") != "function")
        fail("tool_choice.type", "'tool_choice.type' must be function");
      const json* fn = field(*v, "function");
      const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
      if (!name) fail("tool_choice.function.name", "'tool_choice.function.name' is required");
      p.tool_choice = as_string(*name, "tool_choice.function.name");
      p.tool_choice_named = true;
      bool known = false;
      for (const auto& t : p.tools) known |= t["function"]["name"] == p.tool_choice;
      if (!known) fail("tool_choice.function.name", "tool_choice names a function that is not in 'tools'");
    } else {
      wrong_type("tool_choice", "a string or an object", *v);
    }
  }
  if (const json* v = field(body, "logprobs")) p.logprobs = as_bool(*v, "logprobs");
  if (const json* v = field(body, "top_logprobs")) {
    p.top_logprobs = static_cast<int>(as_int(*v, "top_logprobs", 0, 20));
    if (p.top_logprobs > 0 && !p.logprobs) fail("top_logprobs", "'top_logprobs' requires 'logprobs': true");
  }
  if (const json* v = field(body, "chat_template_kwargs")) {
    if (!v->is_object()) wrong_type("chat_template_kwargs", "an object", *v);
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (it.key() == "enable_thinking") {
        if (!it.value().is_null()) p.enable_thinking = as_bool(it.value(), "chat_template_kwargs.enable_thinking");
      } else if (it.key() == "messages" || it.key() == "tools" || it.key() == "add_generation_prompt") {
        fail("chat_template_kwargs." + it.key(), "'" + it.key() + "' is set by the server, not by chat_template_kwargs");
      } else {
        p.template_kwargs[it.key()] = it.value();
      }
    }
  }
  if (p.tool_choice == "required" && p.tools.empty()) fail("tool_choice", "tool_choice 'required' needs 'tools'");
  if ((p.tool_choice == "required" || p.tool_choice_named) && p.response_grammar)
    fail("response_format", "response_format cannot be combined with tool_choice 'required' or a named function");
  // What the template renders into the prompt, bounded before it renders.
  check_prompt_bytes(p.messages.dump().size() + p.tools.dump().size() + p.template_kwargs.dump().size(), limits,
                     "messages");
  return p;
}

CacheMode parse_cache_mode(const std::string& header) {
  if (header.empty() || header == "default") return CacheMode::kDefault;
  if (header == "bypass") return CacheMode::kBypass;
  if (header == "read-only") return CacheMode::kReadOnly;
  throw ApiException{bad_request("X-Cache-Mode", "X-Cache-Mode must be default, bypass or read-only", "invalid_header")};
}

}  // namespace sb
