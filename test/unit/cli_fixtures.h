/*
 * cli_fixtures.h - the agentsched binary run as a command line, for the
 * tests of its subcommands (test_shardctl, test_replay): the command is
 * built like printf, run under sh, and its standard output captured.
 */
#ifndef AGENTSCHED_TEST_CLI_FIXTURES_H
#define AGENTSCHED_TEST_CLI_FIXTURES_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

/* cli_run runs "AGENTSCHED_BINARY <fmt...>" under sh (the arguments may
 * redirect, e.g. end in "2>&1") and returns all it wrote to its standard
 * output, NUL-ended, for the test to free; *status is pclose's status
 * (WEXITSTATUS gives the exit code). */
static char *cli_run(int *status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), unused));
static char *cli_run(int *status, const char *fmt, ...)
{
    char cmd[4096];
    int n = snprintf(cmd, sizeof cmd, "%s ", AGENTSCHED_BINARY);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
    va_end(ap);
    cr_assert(m >= 0 && (size_t)m < sizeof cmd - (size_t)n, "command too long: %s", cmd);
    FILE *f = popen(cmd, "r");
    cr_assert(f, "popen %s", cmd);
    size_t cap = 1 << 16, len = 0, got;
    char *out = malloc(cap);
    cr_assert(out);
    while ((got = fread(out + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len == cap - 1) {
            out = realloc(out, cap *= 2);
            cr_assert(out);
        }
    }
    out[len] = '\0';
    *status = pclose(f);
    return out;
}

#endif
