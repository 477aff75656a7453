/*
 * buf.h - capped, growable byte buffer for building responses.
 *
 * Every buffer has a cap; an append past the cap fails with AS_ETOOBIG and
 * sets the sticky `err`, so a builder may append many times and check once.
 * The data is always NUL-terminated (when non-empty).
 */
#ifndef AGENTSCHED_BUF_H
#define AGENTSCHED_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"

typedef struct buf {
    char *data;   /* owned; NULL until the first append */
    size_t len;   /* bytes used, excluding the terminating NUL */
    size_t alloc; /* bytes allocated */
    size_t cap;   /* max len; 0 = 64 MiB */
    as_err err;   /* first error of any append (sticky) */
} buf;

/* buf_init prepares an empty buffer with the given cap (0 = 64 MiB). */
void buf_init(buf *b, size_t cap);

/* buf_free releases the data; the buffer may be reused after buf_init. */
void buf_free(buf *b);

/* buf_reset empties the buffer, keeping its allocation and clearing err. */
void buf_reset(buf *b);

/* buf_reserve makes room for extra more bytes (and the NUL) now, so the
 * appends that follow do not reallocate; AS_ETOOBIG past the cap, AS_ENOMEM
 * (both sticky, as for an append). */
as_err buf_reserve(buf *b, size_t extra);

/* buf_append appends n bytes. */
as_err buf_append(buf *b, const void *data, size_t n);

/* buf_puts appends a NUL-terminated string. */
as_err buf_puts(buf *b, const char *s);

/* buf_printf appends formatted text. */
as_err buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* buf_json_str appends s[0..n) as a quoted, escaped JSON string. */
as_err buf_json_str(buf *b, const char *s, size_t n);

/* buf_json_quote writes s[0..n) as buf_json_str does (quotes included, no
 * NUL) into o, which has room for n * 6 + 2 bytes; returns the end. For
 * writers that batch output in their own chunks. */
char *buf_json_quote(char *o, const char *s, size_t n);

/* buf_json_cstr appends the NUL-terminated s as a JSON string, or `null`
 * when s is NULL. */
as_err buf_json_cstr(buf *b, const char *s);

/* buf_take hands the data to the caller (who frees it with free()) and
 * leaves the buffer empty. *len receives the length. Never NULL on AS_OK. */
as_err buf_take(buf *b, char **data, size_t *len);

#endif
