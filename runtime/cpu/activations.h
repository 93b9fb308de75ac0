// The scalar activations of the forward pass, in one place so that every
// kernel rounds them the same way (the bank's promise needs the same bits
// whichever layer or path computes them).
#pragma once

#include <cmath>

#include "runtime/kernels.h"

namespace sb::cpu {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
// PyTorch's softplus with its threshold: x itself above 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

inline float activate(Activation act, float x) {
  switch (act) {
    case Activation::kSigmoid: return sigmoid(x);
    case Activation::kSilu: return silu(x);
    case Activation::kIdentity: break;
  }
  return x;
}

}  // namespace sb::cpu
