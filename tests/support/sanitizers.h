// Whether this translation unit is built under a sanitizer, the same way for GCC and
// clang: GCC defines __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__, clang (14) answers only
// __has_feature. Tests use it to scale down or skip what a sanitizer cannot run.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define SPRAY_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPRAY_UNDER_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define SPRAY_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPRAY_UNDER_TSAN 1
#endif
#endif
