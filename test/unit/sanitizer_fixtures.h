/*
 * sanitizer_fixtures.h - what a test may need to know of the build it runs
 * in: UNDER_TSAN (1 in the ThreadSanitizer build, else 0) and FX_SLOW, the
 * factor for deadlines that only bound a wait for something that must
 * happen (sanitizer builds run several times slower, and CI machines are
 * shared). A deadline that is itself the claim under test stays as it is
 * in the plain build, which runs first.
 */
#ifndef AGENTSCHED_TEST_SANITIZER_FIXTURES_H
#define AGENTSCHED_TEST_SANITIZER_FIXTURES_H

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define FX_SLOW 5
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define FX_SLOW 5
#endif
#endif
#ifndef FX_SLOW
#define FX_SLOW 1
#endif

#endif
