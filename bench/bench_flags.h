// Clocks and list flags shared by the kernel and model benchmarks.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace sb::bench {

// The products of the 0.8b qwen3_5 preset, rows x columns: qkv, z, out (delta
// net); q (gated), o; gate/up, down. The kernel benchmarks' default --shapes.
inline constexpr const char* k08bShapes = "6144x1024,2048x1024,1024x2048,4096x1024,3584x1024,1024x3584";

// One line on stderr naming the benchmark and what went wrong; returns the
// exit code of a bad input (2).
int fail(const Status& s);

double wall_seconds();  // a steady clock
// User and system CPU time of the whole process: on a machine shared with
// other work, what the benchmark itself spent.
double process_cpu_seconds();

// `text` as positive integers separated by `sep` ("1,8,64"); `flag` names
// it in the error.
Status positive_ints(const std::string& flag, const std::string& text, char sep, std::vector<int64_t>* out);
// "NxK,NxK,...": matrix shapes, rows by columns.
Status matrix_shapes(const std::string& flag, const std::string& text, std::vector<std::pair<int64_t, int64_t>>* out);

}  // namespace sb::bench
