// Bulk mode of the tokenize and detokenize commands (--jsonl): one JSON value
// in per stdin line, one JSON value out per stdout line, in order.
// Called from the command's thread only.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace sb {

// Runs `each` on every stdin line (parsed; a line that is not JSON arrives
// discarded) and prints what it returns. Stops at the first error, returned
// as kInvalidArgument "stdin line N: <message>". A failed read of stdin is an
// I/O error.
Status map_jsonl_stdin(const std::function<Status(const nlohmann::json& in, nlohmann::json* out)>& each);

// Flushes stdout; an error when anything written to it was lost.
Status finish_stdout();

}  // namespace sb
