// POST /tokenize and /detokenize (docs/interface.md, "POST /tokenize"): the ids a
// completion would prefill for a body, and the text of ids, for clients that
// count or inspect tokens (the shapes vLLM gives them). A body is checked as
// its completion route checks it, so the ids are the ones that route runs.
#include <httplib.h>

#include <memory>
#include <string>
#include <vector>

#include "server/protocols/json_fields.h"
#include "server/protocols/request_parse.h"
#include "server/server.h"
#include "server/transport/connections.h"
#include "server/transport/prepare_pool.h"
#include "server/transport/sse.h"

namespace sb {
namespace {

using namespace json_fields;
const char* kJson = "application/json";

struct DetokenizeParams {
  std::string model;
  std::vector<int32_t> tokens;
};

// {"tokens": [ids], "model": optional}; every other field is refused.
DetokenizeParams parse_detokenize(const json& body, int64_t vocab_size, int64_t max_tokens) {
  DetokenizeParams p;
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "tokens" && it.key() != "model")
      fail(shown_key(it.key()), "unsupported field '" + shown_key(it.key()) + "' for /detokenize");
  if (const json* v = field(body, "model")) p.model = as_string(*v, "model");
  const json* tokens = field(body, "tokens");
  if (tokens == nullptr) fail("tokens", "'tokens' is required");
  if (!tokens->is_array()) wrong_type("tokens", "an array of token ids", *tokens);
  if (max_tokens > 0 && static_cast<int64_t>(tokens->size()) > max_tokens)
    fail("tokens", "'tokens' has " + std::to_string(tokens->size()) + " ids, more than the limit of " +
                       std::to_string(max_tokens));
  for (size_t i = 0; i < tokens->size(); ++i)
    p.tokens.push_back(
        static_cast<int32_t>(as_int((*tokens)[i], "tokens[" + std::to_string(i) + "]", 0, vocab_size - 1)));
  return p;
}

}  // namespace

void Server::install_token_routes() {
  http_->Post(
      "/tokenize", guarded_body([this](const httplib::Request& req, const std::string& body, httplib::Response& res) {
        CompletionInput in = completion_input(req, res.get_header_value("X-Request-Id"));
        PreparedCompletion prepared;
        const bool ran = prepare_->run([&] {
          const nlohmann::ordered_json parsed = parse_body(body, options_.limits);
          in.chat = parsed.contains("messages");
          prepared = prepare_parsed_completion(*backend_, options_.limits, in, parsed);
        });
        if (!ran) throw ApiException{overloaded(503, "the server is shutting down")};
        const std::vector<int32_t>& ids = prepared.request.prompt;
        const int64_t limit = options_.limits.max_prompt_tokens;
        res.set_content(dump_json(ResponseJson{{"count", static_cast<int64_t>(ids.size())},
                                               {"max_model_len", limit > 0 ? limit : backend_->context_length()},
                                               {"tokens", ids}}),
                        kJson);
      }));
  http_->Post("/detokenize",
              guarded_body([this](const httplib::Request& req, const std::string& body, httplib::Response& res) {
                const DetokenizeParams p = parse_detokenize(parse_body(body, options_.limits), backend_->vocab_size(),
                                                            options_.limits.max_prompt_tokens);
                check_model_name(*backend_, completion_input(req, res.get_header_value("X-Request-Id")), p.model);
                std::unique_ptr<TextStream> text = backend_->new_text_stream();
                std::string prompt;
                for (int32_t id : p.tokens) prompt += text->push(id);
                prompt += text->finish();
                res.set_content(dump_json(ResponseJson{{"prompt", prompt}}), kJson);
              }));
}

}  // namespace sb
