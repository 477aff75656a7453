/* test_log.c - log lines: one line per event whatever the values hold. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentsched/base/log.h"

/* Runs one log_msg with stderr sent to a temporary file; returns its text. */
static void capture(char *out, size_t n, const char *value)
{
    char path[] = "/tmp/agentsched-test-log-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    log_set_level(LOG_INFO);
    log_info("msg=\"bound\" pod=%s node=n1", value);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fdopen(fd, "r");
    rewind(f);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = '\0';
    fclose(f);
    unlink(path);
}

Test(log, a_value_cannot_start_a_line_of_its_own)
{
    char out[4096];
    capture(out, sizeof out, "ns/p\nlevel=error msg=\"FAKE\"\r\t\x1b[31m");
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "one line: %s", out);
    cr_assert_null(strchr(out, '\r'));
    cr_assert_null(strchr(out, '\x1b'));
    cr_assert_not_null(strstr(out, "pod=ns/p?level=error msg=\"FAKE\"???[31m node=n1"), "%s", out);
}

Test(log, plain_values_are_untouched)
{
    char out[4096];
    capture(out, sizeof out, "default/agent-7");
    cr_assert_not_null(strstr(out, " level=info msg=\"bound\" pod=default/agent-7 node=n1\n"), "%s",
                       out);
}
