// ApiError: an HTTP error in OpenAI's shape,
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}.
//
// Only the HTTP layer uses it; inside the engine errors travel as Status.
// `param` names the offending request field (e.g. "messages[2].content"), or
// is null when no single field is to blame. Plain value type, no state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace sb {

enum class Admit;  // engine/engine.h

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null

  nlohmann::json to_json() const {
    nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
    if (!param.empty()) e["param"] = param;
    if (!code.empty()) e["code"] = code;
    return nlohmann::json{{"error", e}};
  }
};

inline ApiError bad_request(std::string param, std::string message, std::string code = "invalid_value") {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}
inline ApiError too_large(std::string param, std::string message, std::string code) {
  return ApiError{413, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}
inline ApiError unauthorized(std::string message) {
  return ApiError{401, std::move(message), "invalid_request_error", "", "invalid_api_key"};
}
inline ApiError forbidden(std::string message) {
  return ApiError{403, std::move(message), "invalid_request_error", "", "admin_key_required"};
}
inline ApiError not_found(std::string param, std::string message, std::string code) {
  return ApiError{404, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}
inline ApiError overloaded(int status, std::string message) {
  return ApiError{status, std::move(message), "server_error", "", status == 429 ? "queue_full" : "unavailable"};
}
inline ApiError deadline_error(std::string message) {
  return ApiError{504, std::move(message), "server_error", "", "deadline_exceeded"};
}
inline ApiError internal_error(const std::string& request_id) {
  return ApiError{500, "internal error (request " + request_id + "); see the server log", "server_error", "",
                  "internal_error"};
}

// The one mapping from the engine's answers to HTTP, for every route:
// a refusal at admission (Engine::submit: queue full 429 queue_full, tenant
// over its share 429 tenant_share_exceeded, closed 503), and a failed
// Status: kInvalidArgument 400 (naming `param`), kNotFound 404,
// kUnsupported 501, kResourceExhausted 504 (a request's deadline),
// kCancelled 499 (nobody is listening; nginx's code), anything else 500
// with the request id (is_internal(): the caller logs it).
ApiError admission_error(Admit admit);
ApiError status_error(const Status& status, const std::string& param, const std::string& request_id);
bool is_internal(const Status& status);

// Thrown by the request parser and caught by the route handlers.
struct ApiException {
  ApiError error;
};

}  // namespace sb
