#include "bench/report_text.h"

#include <cstdarg>
#include <cstdio>

namespace sb {

std::string fmt(const char* format, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  return buf;
}

}  // namespace sb
