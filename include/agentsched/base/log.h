/*
 * log.h - leveled, line-oriented logs on stderr.
 *
 * One line per event: "2026-11-30T05:12:00.123Z level=info msg=..." followed
 * by key=value pairs the caller formats. Decisions are logged with the pod,
 * the chosen node and the reasons, so an operator can see why.
 * The level is set once at start-up (log_set_level) before threads start;
 * it is the only process-wide setting outside the service context.
 */
#ifndef AGENTSCHED_LOG_H
#define AGENTSCHED_LOG_H

#include <stdbool.h>

typedef enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 } log_level;

/* log_level_parse sets *out from a level's name (error, warn, info, debug:
 * the names log lines carry); false, *out untouched, for anything else. */
bool log_level_parse(const char *s, log_level *out);

/* log_set_level sets the most verbose level written (default LOG_INFO).
 * log_enabled: nonzero when lvl would be written. log_msg writes one line
 * (timestamp, level=, then fmt printf-style; cut at 2047 bytes; control
 * characters, newlines included, shown as '?') to stderr when enabled.
 * All thread-safe (the level is read atomically). */
void log_set_level(log_level lvl);
int log_enabled(log_level lvl);
void log_msg(log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) (log_enabled(LOG_DEBUG) ? log_msg(LOG_DEBUG, __VA_ARGS__) : (void)0)

#endif
