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
#include <stdint.h>
#include <time.h>

/* clock_mono_ns: CLOCK_MONOTONIC in nanoseconds; clock_mono_ms the same in
 * milliseconds. Thread-safe, no failure. */
uint64_t clock_mono_ns(void);
int64_t clock_mono_ms(void);

/* clock_now_ms: CLOCK_REALTIME in milliseconds since the epoch. */
int64_t clock_now_ms(void);

/* clock_deadline_ms returns the CLOCK_MONOTONIC instant ms milliseconds from
 * now (ms <= 0: now), normalised, for pthread_cond_timedwait on a condition
 * made by clock_cond_init. */
struct timespec clock_deadline_ms(int64_t ms);

/* clock_cond_init initialises *cond to time its waits on CLOCK_MONOTONIC.
 * Returns pthread's error number (0 on success); the caller destroys it. */
int clock_cond_init(pthread_cond_t *cond);

#endif
