/* test_clock.c - the clocks: monotonic readings never go back, deadlines
 * are normalised, and a condition made by clock_cond_init times out on the
 * monotonic deadline; wall readings and their RFC 3339 form. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>

#include "agentsched/base/clock.h"

Test(clock, monotonic_never_goes_back)
{
    uint64_t prev = clock_mono_ns();
    for (int i = 0; i < 1000; i++) {
        uint64_t now = clock_mono_ns();
        cr_assert_geq(now, prev);
        prev = now;
    }
    int64_t ms = clock_mono_ms();
    cr_expect_leq(ms, (int64_t)(clock_mono_ns() / 1000000u));
}

Test(clock, wall_clock_is_after_2020)
{
    cr_expect_gt(clock_now_ms(), (int64_t)1577836800000); /* 2020-01-01 */
}

Test(clock, deadlines_are_normalised)
{
    int64_t steps[] = {-5, 0, 1, 999, 1000, 1001, 2500};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int64_t before = (int64_t)(clock_mono_ns() / 1000000u);
        struct timespec ts = clock_deadline_ms(steps[i]);
        cr_expect(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000, "step %lld", (long long)steps[i]);
        int64_t at = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        int64_t want = before + (steps[i] > 0 ? steps[i] : 0);
        cr_expect_geq(at, want, "step %lld", (long long)steps[i]);
        cr_expect_leq(at, want + 1000, "step %lld", (long long)steps[i]);
    }
}

Test(clock, a_monotonic_condition_times_out)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    cr_assert_eq(clock_cond_init(&cv), 0);
    uint64_t t0 = clock_mono_ns();
    struct timespec until = clock_deadline_ms(20);
    pthread_mutex_lock(&mu);
    int rc = 0;
    while (rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&cv, &mu, &until);
    pthread_mutex_unlock(&mu);
    cr_expect_geq(clock_mono_ns() - t0, 20u * 1000000u);
    pthread_cond_destroy(&cv);
}

Test(clock, wall_readings_agree)
{
    int64_t ms = clock_now_ms();
    int64_t us = clock_now_us();
    cr_expect_geq(us / 1000, ms);
    cr_expect_leq(us / 1000, ms + 1000);
}

Test(clock, rfc3339_formats_the_api_server_times)
{
    /* 2026-11-30T23:59:01.123456Z */
    int64_t us = 1796083141123456LL;
    char out[40];
    clock_rfc3339(us, 0, out, sizeof out);
    cr_expect_str_eq(out, "2026-11-30T23:59:01Z");
    clock_rfc3339(us, 3, out, sizeof out);
    cr_expect_str_eq(out, "2026-11-30T23:59:01.123Z");
    clock_rfc3339(us, 6, out, sizeof out);
    cr_expect_str_eq(out, "2026-11-30T23:59:01.123456Z");
    char small[8];
    clock_rfc3339(us, 6, small, sizeof small);
    cr_expect_str_eq(small, "2026-11");
}
