/*
 * clock.h - the one reading of the clocks every module uses.
 *
 * Monotonic time measures durations and deadlines (never goes back, not
 * moved by NTP); wall time stamps what leaves the process (Events, Lease
 * renew times, log lines). Condition variables that wait on a deadline are
 * set to CLOCK_MONOTONIC (clock_cond_init) and handed clock_deadline_ms's
 * timespec, so a wall-clock step never shortens or stretches a wait.
 */
#ifndef AGENTSCHED_CLOCK_H
#define AGENTSCHED_CLOCK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* clock_mono_ns: CLOCK_MONOTONIC in nanoseconds; clock_mono_ms the same in
 * milliseconds. Thread-safe, no failure. */
uint64_t clock_mono_ns(void);
int64_t clock_mono_ms(void);

/* clock_now_ms: CLOCK_REALTIME in milliseconds since the epoch;
 * clock_now_us the same in microseconds. */
int64_t clock_now_ms(void);
int64_t clock_now_us(void);

/*
 * clock_rfc3339 writes the wall instant us (microseconds since the epoch,
 * not negative) as RFC 3339 UTC into out[0..len), with digits (0, 3 or 6)
 * fraction digits: "2026-11-30T23:59:01Z", "...01.123Z", "...01.123456Z".
 * The API server's Time fields take 0 digits and MicroTime fields 6.
 * Truncated to len like snprintf; out is always terminated when len > 0.
 */
void clock_rfc3339(int64_t us, int digits, char *out, size_t len);

/* clock_deadline_ms returns the CLOCK_MONOTONIC instant ms milliseconds from
 * now (ms <= 0: now), normalised, for pthread_cond_timedwait on a condition
 * made by clock_cond_init. */
struct timespec clock_deadline_ms(int64_t ms);

/* clock_cond_init initialises *cond to time its waits on CLOCK_MONOTONIC.
 * Returns pthread's error number (0 on success); the caller destroys it. */
int clock_cond_init(pthread_cond_t *cond);

#endif
