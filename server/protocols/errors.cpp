#include "server/protocols/errors.h"

#include "engine/engine.h"

namespace sb {

ApiError admission_error(Admit admit) {
  switch (admit) {
    case Admit::kFull:
      return overloaded(429, "too many requests are waiting; retry later");
    case Admit::kTenantFull:
      return ApiError{429, "this key's tenant holds its share of the server's slots (--tenant-share); retry later",
                      "server_error", "", "tenant_share_exceeded"};
    case Admit::kInvalid:  // Backend::check() refuses these first, with the reason
      return bad_request("", "the request is invalid");
    case Admit::kClosed:
    case Admit::kOk:
      break;
  }
  return overloaded(503, "the server is shutting down");
}

bool is_internal(const Status& status) {
  switch (status.code()) {
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kUnsupported:
    case Code::kResourceExhausted:
    case Code::kCancelled:
      return false;
    default:
      return true;
  }
}

ApiError status_error(const Status& status, const std::string& param, const std::string& request_id) {
  switch (status.code()) {
    case Code::kInvalidArgument:
      return bad_request(param, status.message());
    case Code::kNotFound:
      return not_found(param, status.message(), "not_found");
    case Code::kUnsupported:
      return ApiError{501, status.message(), "invalid_request_error", "", "no_bank"};
    case Code::kResourceExhausted:
      return deadline_error(status.message());
    case Code::kCancelled:
      return ApiError{499, status.message(), "server_error", "", "cancelled"};
    default:
      return internal_error(request_id);
  }
}

}  // namespace sb
