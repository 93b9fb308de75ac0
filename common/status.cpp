#include "common/status.h"

namespace sb {

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kNotFound: return "not found";
    case Code::kCorruption: return "corruption";
    case Code::kIoError: return "I/O error";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kUnsupported: return "unsupported";
    case Code::kResourceExhausted: return "resource exhausted";
    case Code::kCancelled: return "cancelled";
    case Code::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(code_name(code_)) + ": " + message_;
}

}  // namespace sb
