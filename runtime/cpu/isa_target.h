// SB_ISA_TARGET_BEGIN("avx2,fma") ... SB_ISA_TARGET_END: the functions between
// them are compiled for the named instruction sets whatever -march says, with
// GCC and with Clang alike (Clang ignores GCC's target pragma). Callers run
// them only where quant_isa_supported() says the CPU has those sets. Include
// <immintrin.h> before the BEGIN.
#pragma once

#define SB_ISA_PRAGMA(text) _Pragma(#text)
#if defined(__clang__)
#define SB_ISA_TARGET_BEGIN(features) \
  SB_ISA_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define SB_ISA_TARGET_END SB_ISA_PRAGMA(clang attribute pop)
#else
#define SB_ISA_TARGET_BEGIN(features) SB_ISA_PRAGMA(GCC push_options) SB_ISA_PRAGMA(GCC target(features))
#define SB_ISA_TARGET_END SB_ISA_PRAGMA(GCC pop_options)
#endif
