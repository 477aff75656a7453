/* log.c - stderr logging. */
#include "agentsched/base/log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agentsched/base/clock.h"

/* Written once at start-up, before any thread exists (see log.h). */
static int log_level_current = LOG_INFO;

static const char *const log_names[] = {"error", "warn", "info", "debug"};

/* See log.h. */
bool log_level_parse(const char *s, log_level *out)
{
    for (int k = LOG_ERROR; k <= LOG_DEBUG; k++)
        if (strcmp(s, log_names[k]) == 0) {
            *out = (log_level)k;
            return true;
        }
    return false;
}

/* See log.h. */
void log_set_level(log_level lvl)
{
    __atomic_store_n(&log_level_current, (int)lvl, __ATOMIC_RELAXED);
}

/* See log.h. */
int log_enabled(log_level lvl)
{
    return (int)lvl <= __atomic_load_n(&log_level_current, __ATOMIC_RELAXED);
}

/* See log.h. */
void log_msg(log_level lvl, const char *fmt, ...)
{
    if (!log_enabled(lvl))
        return;
    char line[2048];
    clock_rfc3339(clock_now_us(), 3, line, sizeof line);
    size_t at = strlen(line);
    int n = snprintf(line + at, sizeof line - at, " level=%s ", log_names[lvl]);
    if (n >= 0)
        n += (int)at;
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* Values come from requests and the API server (pod names, reasons):
     * a control character in one must not start a forged line of its
     * own, so every one of them is shown as '?'. */
    for (char *p = line; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    /* One stdio call per line (stdio locks the stream for it), so lines
     * from different threads never interleave. */
    fprintf(stderr, "%s\n", line);
}
