// SB_UNDER_ASAN and SB_UNDER_TSAN: 1 in a binary built with that sanitizer,
// whichever compiler built it (GCC defines __SANITIZE_*__, Clang answers
// __has_feature), else 0.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define SB_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SB_UNDER_ASAN 1
#endif
#endif
#ifndef SB_UNDER_ASAN
#define SB_UNDER_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define SB_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SB_UNDER_TSAN 1
#endif
#endif
#ifndef SB_UNDER_TSAN
#define SB_UNDER_TSAN 0
#endif
