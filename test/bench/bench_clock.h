/*
 * bench_clock.h - the clocks every benchmark reads: wall (monotonic) time
 * and thread or process CPU time, in seconds or nanoseconds.
 */
#ifndef AGENTSCHED_BENCH_CLOCK_H
#define AGENTSCHED_BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

/* bench_clock_ns reads clock id (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID,
 * CLOCK_PROCESS_CPUTIME_ID) in nanoseconds. */
static inline double bench_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* bench_clock_s reads clock id in seconds. */
static inline double bench_clock_s(clockid_t id)
{
    return bench_clock_ns(id) / 1e9;
}

/* bench_now_s: monotonic wall time in seconds. */
static inline double bench_now_s(void)
{
    return bench_clock_s(CLOCK_MONOTONIC);
}

/* bench_now_ns: monotonic wall time in integer nanoseconds. */
static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
