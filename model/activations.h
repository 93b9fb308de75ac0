// The scalar activations of the forward pass, in one place so that every
// layer rounds them the same way (the bank's promise needs the same bits
// whichever layer or path computes them).
#pragma once

#include <cmath>

namespace sb {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace sb
