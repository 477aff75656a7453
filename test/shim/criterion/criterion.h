/*
 * test/shim/criterion/criterion.h - a minimal stand-in for Criterion, used
 * only by the ThreadSanitizer build (build/tsan).
 *
 * Criterion's runner cannot start under TSan: its inheritable arena is
 * mapped at a random free address it probes with mincore(), and TSan has
 * reserved that whole range (Snaipe/Criterion issue 274). This header keeps
 * the same test sources building there: it implements the subset of the
 * Criterion API the tests use (Test, TestSuite with .init/.fini/.timeout/
 * .disabled, cr_assert*, cr_expect*, cr_log_*) and a main() that forks one
 * child per test, like Criterion, with a timeout. Arguments are accepted and
 * ignored, except a substring filter: --filter SUITE/NAME.
 *
 * Messages must be string literals (as in Criterion's documentation).
 */
#ifndef AGENTSCHED_CRITERION_SHIM_H
#define AGENTSCHED_CRITERION_SHIM_H

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct crs_opts {
    void (*init)(void);
    void (*fini)(void);
    double timeout;
    bool disabled;
    const char *description;
    int exit_code;
    int signal;
};

struct crs_test {
    const char *suite;
    const char *name;
    void (*fn)(void);
    struct crs_opts opts;
};

struct crs_suite {
    const char *name;
    struct crs_opts opts;
};

#define CRS_MAX 2048
static struct crs_test *crs_tests[CRS_MAX];
static size_t crs_ntests;
static struct crs_suite *crs_suites[256];
static size_t crs_nsuites;
static int crs_expect_failed;

static inline void crs_register(struct crs_test *t)
{
    if (crs_ntests < CRS_MAX)
        crs_tests[crs_ntests++] = t;
}

static inline void crs_register_suite(struct crs_suite *s)
{
    if (crs_nsuites < sizeof crs_suites / sizeof crs_suites[0])
        crs_suites[crs_nsuites++] = s;
}

#define Test(suite, name, ...)                                                                     \
    static void crs_fn_##suite##_##name(void);                                                     \
    static struct crs_test crs_t_##suite##_##name = {                                              \
        #suite, #name, crs_fn_##suite##_##name, {__VA_ARGS__}};                                    \
    __attribute__((constructor)) static void crs_reg_##suite##_##name(void)                        \
    {                                                                                              \
        crs_register(&crs_t_##suite##_##name);                                                     \
    }                                                                                              \
    static void crs_fn_##suite##_##name(void)

#define TestSuite(suite, ...)                                                                      \
    static struct crs_suite crs_s_##suite = {#suite, {__VA_ARGS__}};                               \
    __attribute__((constructor)) static void crs_regs_##suite(void)                                \
    {                                                                                              \
        crs_register_suite(&crs_s_##suite);                                                        \
    }

static inline void crs_report(bool fatal, const char *file, int line, const char *expr,
                              const char *fmt, ...)
{
    fprintf(stderr, "%s:%d: %s: %s", file, line, fatal ? "Assertion failed" : "Expectation failed",
            expr);
    if (fmt && *fmt) {
        fprintf(stderr, ": ");
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fprintf(stderr, "\n");
    fflush(stderr);
    if (fatal)
        _exit(1);
    crs_expect_failed = 1;
}

#define CRS_CHECK(fatal, ok, expr, ...)                                                            \
    do {                                                                                           \
        if (!(ok))                                                                                 \
            crs_report((fatal), __FILE__, __LINE__, (expr), "" __VA_ARGS__);                       \
    } while (0)

#define cr_assert(c, ...)     CRS_CHECK(1, (c), #c, __VA_ARGS__)
#define cr_expect(c, ...)     CRS_CHECK(0, (c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) CRS_CHECK(1, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) CRS_CHECK(0, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_fail(...)   CRS_CHECK(1, 0, "fail", __VA_ARGS__)
#define cr_expect_fail(...)   CRS_CHECK(0, 0, "fail", __VA_ARGS__)

#define CRS_CMP(fatal, a, op, b, ...) CRS_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define cr_assert_eq(a, b, ...)       CRS_CMP(1, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...)      CRS_CMP(1, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...)       CRS_CMP(1, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...)      CRS_CMP(1, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...)       CRS_CMP(1, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...)      CRS_CMP(1, a, >=, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...)       CRS_CMP(0, a, ==, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...)      CRS_CMP(0, a, !=, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...)       CRS_CMP(0, a, <, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...)      CRS_CMP(0, a, <=, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...)       CRS_CMP(0, a, >, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...)      CRS_CMP(0, a, >=, b, __VA_ARGS__)

#define cr_assert_null(p, ...)     CRS_CHECK(1, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) CRS_CHECK(1, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_null(p, ...)     CRS_CHECK(0, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) CRS_CHECK(0, (p) != NULL, #p " != NULL", __VA_ARGS__)

/* NULL compares unequal to every string (a failure, not a crash). */
static inline int crs_strcmp(const char *a, const char *b)
{
    if (!a || !b)
        return a == b ? 0 : 1;
    return strcmp(a, b);
}
#define CRS_STR(fatal, a, op, b, ...)                                                              \
    CRS_CHECK(fatal, crs_strcmp((a), (b)) op 0, #a " " #op " " #b, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...)     CRS_STR(1, a, ==, b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...)    CRS_STR(1, a, !=, b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...)     CRS_STR(0, a, ==, b, __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...)    CRS_STR(0, a, !=, b, __VA_ARGS__)
#define cr_assert_str_empty(a, ...)     CRS_CHECK(1, (a)[0] == '\0', #a " is empty", __VA_ARGS__)
#define cr_assert_str_not_empty(a, ...) CRS_CHECK(1, (a)[0] != '\0', #a " not empty", __VA_ARGS__)

#define cr_assert_float_eq(a, b, eps, ...)                                                         \
    CRS_CHECK(1, fabs((double)(a) - (double)(b)) <= (eps), #a " ~= " #b, __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...)                                                         \
    CRS_CHECK(0, fabs((double)(a) - (double)(b)) <= (eps), #a " ~= " #b, __VA_ARGS__)
#define cr_assert_arr_eq(a, b, size, ...)                                                          \
    CRS_CHECK(1, memcmp((a), (b), (size)) == 0, #a " == " #b, __VA_ARGS__)
#define cr_expect_arr_eq(a, b, size, ...)                                                          \
    CRS_CHECK(0, memcmp((a), (b), (size)) == 0, #a " == " #b, __VA_ARGS__)

#define cr_log_info(...)  (fprintf(stderr, "[----] " __VA_ARGS__), fputc('\n', stderr))
#define cr_log_warn(...)  (fprintf(stderr, "[WARN] " __VA_ARGS__), fputc('\n', stderr))
#define cr_log_error(...) (fprintf(stderr, "[ERR ] " __VA_ARGS__), fputc('\n', stderr))

static inline const struct crs_suite *crs_find_suite(const char *name)
{
    for (size_t i = 0; i < crs_nsuites; i++)
        if (strcmp(crs_suites[i]->name, name) == 0)
            return crs_suites[i];
    return NULL;
}

/* Runs one test in a child; returns 0 pass, 1 fail, 2 crash/timeout. */
static inline int crs_run_one(const struct crs_test *t)
{
    const struct crs_suite *s = crs_find_suite(t->suite);
    double timeout = t->opts.timeout > 0          ? t->opts.timeout
                     : (s && s->opts.timeout > 0) ? s->opts.timeout
                                                  : 120;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0) {
        alarm((unsigned)ceil(timeout));
        if (s && s->opts.init)
            s->opts.init();
        if (t->opts.init)
            t->opts.init();
        t->fn();
        if (t->opts.fini)
            t->opts.fini();
        if (s && s->opts.fini)
            s->opts.fini();
        fflush(NULL);
        _exit(crs_expect_failed ? 1 : 0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        ;
    int want_exit = t->opts.exit_code, want_sig = t->opts.signal;
    if (want_sig)
        return WIFSIGNALED(st) && WTERMSIG(st) == want_sig ? 0 : 1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st) == want_exit ? 0 : (WEXITSTATUS(st) == 1 ? 1 : 2);
    if (WIFSIGNALED(st))
        fprintf(stderr, "%s::%s: killed by signal %d%s\n", t->suite, t->name, WTERMSIG(st),
                WTERMSIG(st) == SIGALRM ? " (timeout)" : "");
    return 2;
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
            filter = argv[++i];
    size_t passed = 0, failed = 0, crashed = 0, ran = 0;
    for (size_t i = 0; i < crs_ntests; i++) {
        const struct crs_test *t = crs_tests[i];
        const struct crs_suite *s = crs_find_suite(t->suite);
        if (t->opts.disabled || (s && s->opts.disabled))
            continue;
        char full[256];
        snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
        if (filter && !strstr(full, filter))
            continue;
        ran++;
        int r = crs_run_one(t);
        if (r == 0)
            passed++;
        else if (r == 1)
            failed++;
        else
            crashed++;
        if (r)
            fprintf(stderr, "[FAIL] %s::%s\n", t->suite, t->name);
    }
    fprintf(stderr, "[====] Synthesis: Tested: %zu | Passing: %zu | Failing: %zu | Crashing: %zu\n",
            ran, passed, failed, crashed);
    return failed || crashed ? 1 : 0;
}

#endif
