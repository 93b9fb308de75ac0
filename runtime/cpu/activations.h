// The scalar activations of the forward pass, in one place so that every
// kernel rounds them the same way (the bank's promise needs the same bits
// whichever layer or path computes them).
#pragma once

#include <cmath>

#include "runtime/cpu/simd.h"
#include "runtime/math.h"
#include "runtime/kernels.h"

namespace sb::cpu {

// e^x by vexp (simd.h), so that a scalar tail gets the bits of a vector lane.
inline V16 sigmoid(V16 x) { return V16::set1(1.0f) / (V16::set1(1.0f) + vexp(V16::zero() - x)); }
inline V16 silu(V16 x) { return x / (V16::set1(1.0f) + vexp(V16::zero() - x)); }
inline float sigmoid(float x) { return lane0(sigmoid(V16::set1(x))); }
inline float silu(float x) { return lane0(silu(V16::set1(x))); }
// PyTorch's softplus with its threshold: x itself above 20; below it
// log(1 + e^x) by runtime/math.h, rounded once.
inline float softplus(float x) { return x > 20.0f ? x : softplus_f(x); }

template <class T>
inline T activate(Activation act, T x) {
  switch (act) {
    case Activation::kSigmoid: return sigmoid(x);
    case Activation::kSilu: return silu(x);
    case Activation::kIdentity: break;
  }
  return x;
}

}  // namespace sb::cpu
