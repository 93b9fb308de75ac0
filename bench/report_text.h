// Text for the benchmark reports: printf-style formatting into a string.
#pragma once

#include <string>

namespace sb {

// At most 511 characters (a report cell or line).
std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace sb
