// The operator's routes (server/server.h, check_admin; docs/interface.md,
// "The operator's view"): the bank's prefixes, recent requests, pins and
// flushes under /v1/bank/, and the /bank page served from the binary
// (server/operator/page/, embedded at build time by tools/embed_files.cmake).
#include <httplib.h>

#include <cstring>
#include <string>

#include "server/protocols/namespace.h"
#include "server/page_assets.h"
#include "server/server.h"
#include "server/transport/connections.h"
#include "server/transport/sse.h"

namespace sb {
namespace {

using nlohmann::json;
const char* kJson = "application/json";
constexpr int64_t kMaxTtlSeconds = 30 * 86400;

void check(const Status& s, const std::string& param = "") {
  if (s) return;
  // A full or closed bank (kResourceExhausted) is the server's failure on
  // these routes, not a request's deadline: a 500 with the request id, logged.
  if (is_internal(s) || s.code() == Code::kResourceExhausted || s.code() == Code::kCancelled)
    throw std::runtime_error(s.to_string());
  throw ApiException{status_error(s, param, "")};
}

size_t query_count(const httplib::Request& req, const char* name, size_t fallback, size_t max) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  size_t n = 0;
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos || (n = std::stoul(v)) < 1 ||
      n > max)
    throw ApiException{
        bad_request(name, std::string("'") + name + "' must be an integer in [1, " + std::to_string(max) + "]")};
  return n;
}

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string string_field(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v->is_string()) throw ApiException{bad_request(name, std::string("'") + name + "' must be a string")};
  return v->get<std::string>();
}

// The namespace a pin or flush names: `namespace` verbatim (as listed by
// /v1/bank/prefixes), else the one a completion by this tenant (null
// without keys) with this `cache_salt` would use.
std::string namespace_of(const json& body, const Tenant* tenant) {
  const bool explicit_ns = field(body, "namespace") != nullptr, salted = field(body, "cache_salt") != nullptr;
  if (explicit_ns && salted)
    throw ApiException{bad_request("namespace", "give at most one of 'namespace' and 'cache_salt'")};
  if (explicit_ns) return string_field(body, "namespace");
  return request_namespace(tenant, salted, salted ? string_field(body, "cache_salt") : "");
}

PinSpec parse_pin(const json& body, const Backend& backend, const Tenant* tenant) {
  PinSpec spec;
  const json* ttl = field(body, "ttl_s");
  if (!ttl || !ttl->is_number_integer() || ttl->get<int64_t>() < 1 || ttl->get<int64_t>() > kMaxTtlSeconds)
    throw ApiException{bad_request(
        "ttl_s", "'ttl_s' (seconds) is required, an integer in [1, " + std::to_string(kMaxTtlSeconds) + "]")};
  spec.ttl_s = ttl->get<int64_t>();
  const json* prompt = field(body, "prompt");
  const json* chain = field(body, "chain");
  if ((prompt != nullptr) == (chain != nullptr))
    throw ApiException{bad_request("prompt", "give exactly one of 'prompt' (text or token ids) and 'chain'")};
  if (chain) {
    if (field(body, "namespace") || field(body, "cache_salt"))
      throw ApiException{
          bad_request("chain", "a chain names its namespace already; drop 'namespace' and 'cache_salt'")};
    spec.by_chain = true;
    spec.chain = string_field(body, "chain");
    return spec;
  }
  spec.name_space = namespace_of(body, tenant);
  if (prompt->is_string()) {
    check(backend.encode(prompt->get<std::string>(), &spec.tokens), "prompt");
  } else if (prompt->is_array()) {
    for (const json& id : *prompt) {
      if (!id.is_number_integer())
        throw ApiException{bad_request("prompt", "'prompt' must be a string or an array of token ids")};
      spec.tokens.push_back(static_cast<int32_t>(std::clamp<int64_t>(id.get<int64_t>(), -1, INT32_MAX)));
    }
  } else {
    throw ApiException{bad_request("prompt", "'prompt' must be a string or an array of token ids")};
  }
  return spec;
}

FlushSpec parse_flush(const json& body, const Tenant* tenant) {
  FlushSpec spec;
  int given = 0;
  for (const char* name : {"all", "namespace", "cache_salt", "root"}) given += field(body, name) ? 1 : 0;
  if (given != 1)
    throw ApiException{bad_request("", "give exactly one of 'all': true, 'namespace', 'cache_salt' and 'root'")};
  if (const json* all = field(body, "all")) {
    if (*all != true) throw ApiException{bad_request("all", "'all' must be true")};
    spec.scope = FlushSpec::Scope::kAll;
  } else if (field(body, "root")) {
    spec.scope = FlushSpec::Scope::kRoot;
    spec.root = string_field(body, "root");
  } else {
    spec.scope = FlushSpec::Scope::kNamespace;
    spec.name_space = namespace_of(body, tenant);
  }
  return spec;
}

const page::Asset* find_asset(const std::string& name) {
  for (const page::Asset& a : page::kAssets)
    if (name == a.name) return &a;
  return nullptr;
}

// Everything the page loads comes from this server; nothing inline.
constexpr char kPagePolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void serve_asset(const page::Asset& a, httplib::Response& res) {
  res.set_content(reinterpret_cast<const char*>(a.data), a.size, a.content_type);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Content-Security-Policy", kPagePolicy);
}

}  // namespace

bool Server::fixed_page_response(std::string_view path, std::string* head, std::string_view* body) {
  const page::Asset* a = path == "/bank"                ? find_asset("bank.html")
                         : path.rfind("/bank/", 0) == 0 ? find_asset(std::string(path.substr(6)))
                                                        : nullptr;
  if (!a) return false;
  *head = std::string("HTTP/1.1 200 OK\r\nContent-Type: ") + a->content_type +
          "\r\nCache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\nContent-Security-Policy: " + kPagePolicy;
  *body = std::string_view(reinterpret_cast<const char*>(a->data), a->size);
  return true;
}

void Server::install_bank_routes() {
  const bool admin = true;
  http_->Get("/v1/bank", guarded(
                             [this](const httplib::Request&, httplib::Response& res) {
                               json j = bank_->bank_stats_json();
                               const Admission& admission = backend_->admission();
                               j["queue"] = {{"queued", admission.queued()}, {"running", admission.running()}};
                               res.set_content(dump_json(j), kJson);
                             },
                             admin));
  http_->Get("/v1/bank/prefixes",
             guarded(
                 [this](const httplib::Request& req, httplib::Response& res) {
                   json out;
                   const std::string sort = req.has_param("sort") ? req.get_param_value("sort") : "tokens";
                   const bool text = req.has_param("text") && req.get_param_value("text") != "0";
                   check(bank_->bank_prefixes(sort, query_count(req, "limit", 100, 10000), text, &out), "sort");
                   res.set_content(dump_json(out), kJson);
                 },
                 admin));
  http_->Get("/v1/bank/requests",
             guarded(
                 [this](const httplib::Request& req, httplib::Response& res) {
                   res.set_content(
                       dump_json(activity_.to_json(query_count(req, "limit", Activity::kRecent, Activity::kRecent))),
                       kJson);
                 },
                 admin));
  http_->Get("/v1/bank/pins", guarded(
                                  [this](const httplib::Request&, httplib::Response& res) {
                                    json out;
                                    check(bank_->bank_pins(&out));
                                    res.set_content(dump_json(out), kJson);
                                  },
                                  admin));
  http_->Post("/v1/bank/pins",
              guarded_body(
                  [this](const httplib::Request& req, const std::string& body, httplib::Response& res) {
                    const Tenant* tenant = check_admin(req);
                    const PinSpec spec = parse_pin(parse_body(body, options_.limits), *backend_, tenant);
                    json out;
                    check(bank_->bank_pin(spec, &out), spec.by_chain ? "chain" : "prompt");
                    res.set_content(dump_json(out), kJson);
                  },
                  admin));
  http_->Delete(R"(/v1/bank/pins/([^/]+))",
                guarded_body(
                    [this](const httplib::Request& req, const std::string&, httplib::Response& res) {
                      check(bank_->bank_unpin(req.matches[1]), "id");
                      res.set_content(dump_json(json{{"id", std::string(req.matches[1])}, {"deleted", true}}), kJson);
                    },
                    admin));
  http_->Post("/v1/bank/flush",
              guarded_body(
                  [this](const httplib::Request& req, const std::string& body, httplib::Response& res) {
                    const Tenant* tenant = check_admin(req);
                    json out;
                    check(bank_->bank_flush(parse_flush(parse_body(body, options_.limits), tenant), &out));
                    res.set_content(dump_json(out), kJson);
                  },
                  admin));

  // The page: static files, public (they hold no data; the API needs the key).
  http_->Get("/bank",
             [](const httplib::Request&, httplib::Response& res) { serve_asset(*find_asset("bank.html"), res); });
  http_->Get(R"(/bank/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    const page::Asset* a = find_asset(req.matches[1]);
    if (!a) {
      res.status = 404;
      res.set_content(dump_json(not_found("", "no such file", "not_found").to_json()), kJson);
      return;
    }
    serve_asset(*a, res);
  });
}

}  // namespace sb
