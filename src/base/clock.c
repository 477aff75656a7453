/*
 * clock.c - see clock.h.
 */
#include "agentsched/base/clock.h"

#include <stdio.h>
#include <string.h>

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
    long frac = (long)(us % 1000000);
    int year = tm.tm_year + 1900;
    if (year < 0 || year > 9999) { /* never in practice; the general form */
        int n = snprintf(out, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", year, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        (void)n;
        return;
    }
    /* Digits by hand: stamps are written per pod (Events, conditions). */
    char t[32], *o = t;
    int parts[6] = {year, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec};
    static const char seps[6] = {'-', '-', 'T', ':', ':', 0};
    for (int i = 0; i < 6; i++) {
        int v = parts[i];
        if (i == 0) {
            *o++ = (char)('0' + v / 1000);
            *o++ = (char)('0' + v / 100 % 10);
        }
        *o++ = (char)('0' + v / 10 % 10);
        *o++ = (char)('0' + v % 10);
        if (seps[i])
            *o++ = seps[i];
    }
    if (digits == 3 || digits == 6) {
        long f = digits == 3 ? frac / 1000 : frac;
        *o++ = '.';
        for (int i = digits - 1; i >= 0; i--) {
            o[i] = (char)('0' + f % 10);
            f /= 10;
        }
        o += digits;
    }
    *o++ = 'Z';
    size_t n = (size_t)(o - t);
    if (!len)
        return;
    if (n >= len)
        n = len - 1;
    memcpy(out, t, n);
    out[n] = 0;
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
