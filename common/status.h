// Status: the one error type that travels through the runtime, the bank and
// the engine. Exceptions stop at the boundaries (HTTP handlers, main()).
//
// A Status is cheap to copy when OK. Codes follow the failure's meaning, not
// its origin: a checksum mismatch is kCorruption whether it came from a file or
// from RAM.
#pragma once

#include <string>
#include <utility>

namespace sb {

enum class Code {
  kOk = 0,
  kNotFound,
  kCorruption,
  kIoError,
  kInvalidArgument,
  kUnsupported,
  kResourceExhausted,  // budgets, disk full
  kCancelled,
  kInternal,
};

const char* code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status not_found(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status corruption(std::string m) { return Status(Code::kCorruption, std::move(m)); }
  static Status io_error(std::string m) { return Status(Code::kIoError, std::move(m)); }
  static Status invalid(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
  static Status unsupported(std::string m) { return Status(Code::kUnsupported, std::move(m)); }
  static Status exhausted(std::string m) { return Status(Code::kResourceExhausted, std::move(m)); }
  static Status cancelled(std::string m) { return Status(Code::kCancelled, std::move(m)); }
  static Status internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corruption: <message>", or "ok".
  std::string to_string() const;

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Evaluates an expression yielding Status and returns it from the enclosing
// function when it is not OK.
#define SB_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::sb::Status sb_status_ = (expr);       \
    if (!sb_status_.is_ok()) return sb_status_; \
  } while (0)

}  // namespace sb
