/*
 * clock.c - see clock.h.
 */
#include "agentsched/base/clock.h"

#include <stdio.h>

/* See clock.h. */
uint64_t clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* See clock.h. */
int64_t clock_mono_ms(void)
{
    return (int64_t)(clock_mono_ns() / 1000000u);
}

/* See clock.h. */
int64_t clock_now_ms(void)
{
    return clock_now_us() / 1000;
}

/* See clock.h. */
int64_t clock_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* See clock.h. */
void clock_rfc3339(int64_t us, int digits, char *out, size_t len)
{
    time_t sec = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    int n = snprintf(out, len, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (n < 0 || (size_t)n >= len)
        return;
    long frac = (long)(us % 1000000);
    if (digits == 3)
        snprintf(out + n, len - (size_t)n, ".%03ldZ", frac / 1000);
    else if (digits == 6)
        snprintf(out + n, len - (size_t)n, ".%06ldZ", frac);
    else
        snprintf(out + n, len - (size_t)n, "Z");
}

/* See clock.h. */
struct timespec clock_deadline_ms(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (ms <= 0)
        return ts;
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

/* See clock.h. */
int clock_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}
