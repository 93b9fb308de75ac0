// The float mode of every CPU kernel: subnormal results flushed to zero and
// subnormal inputs read as zero (MXCSR FTZ and DAZ on x86).
//
// Why: the gated delta rule multiplies by decays e^{G_i - G_j} that reach the
// subnormal range on strongly decaying heads, and x86 computes on subnormals
// through a microcode assist about a hundred times slower (the chunked rule
// ran 7x slower on such a head). One fixed mode also keeps the bits the same
// on every thread: the pool's workers run in it permanently (threads.cpp) and
// each kernel entry point sets it on the calling thread for its duration.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sb::cpu {

class FlushSubnormals {
 public:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned kBits = 0x8040;  // FTZ | DAZ
  FlushSubnormals() : saved_(_mm_getcsr()) {
    if ((saved_ & kBits) != kBits) _mm_setcsr(saved_ | kBits);
  }
  ~FlushSubnormals() {
    if ((saved_ & kBits) != kBits) _mm_setcsr(saved_);
  }
  // For a thread that only ever runs kernels.
  static void set_for_this_thread() { _mm_setcsr(_mm_getcsr() | kBits); }

 private:
  unsigned saved_;
#else
  FlushSubnormals() {}
  static void set_for_this_thread() {}
#endif
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;
};

}  // namespace sb::cpu
