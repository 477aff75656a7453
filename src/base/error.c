/* error.c - as_err names and diagnostics. */
#include "agentsched/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const err_names[AS_ERR__COUNT] = {
    [AS_OK] = "ok",
    [AS_ENOMEM] = "out of memory",
    [AS_EINVAL] = "invalid value",
    [AS_EPARSE] = "parse error",
    [AS_ERANGE] = "value out of range",
    [AS_ENOTFOUND] = "not found",
    [AS_EEXIST] = "already exists",
    [AS_ECONFLICT] = "conflict",
    [AS_EUNSCHED] = "unschedulable",
    [AS_EIO] = "I/O error",
    [AS_ETOOBIG] = "too large",
    [AS_ETIMEOUT] = "timed out",
    [AS_EHTTP] = "HTTP error",
    [AS_EAUTH] = "authentication failed",
    [AS_EUNSUPPORTED] = "unsupported",
    [AS_ELIMIT] = "limit reached",
    [AS_EGONE] = "resource version expired",
    [AS_EINTERNAL] = "internal error",
    [AS_EAGAIN] = "not done yet; try again",
};

/* See error.h. */
const char *as_strerror(as_err err)
{
    if ((int)err < 0 || err >= AS_ERR__COUNT || !err_names[err])
        return "unknown error";
    return err_names[err];
}

/* See error.h. */
size_t as_utf8_excerpt(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--;
    return max;
}

/* See error.h. */
void as_printable(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    dst[i] = '\0';
}

/* utf8_trim cuts s, which a snprintf into cap bytes may have truncated,
 * back to a character boundary: a message or field cut inside a UTF-8
 * sequence would make the JSON error answer that carries it invalid. */
static void utf8_trim(char *s, size_t cap)
{
    size_t n = strlen(s);
    if (n + 1 < cap)
        return; /* not truncated */
    size_t end = n;
    while (end > 0 && ((unsigned char)s[end - 1] & 0xC0) == 0x80)
        end--;
    if (end > 0 && (unsigned char)s[end - 1] >= 0xC0) {
        /* a lead byte: keep its sequence only if it is complete */
        unsigned char lead = (unsigned char)s[end - 1];
        size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (n - (end - 1) < want)
            s[end - 1] = '\0';
    }
}

/* See error.h. */
as_err as_diag_set(as_diag *diag, as_err err, const char *field, const char *fmt, ...)
{
    if (!diag)
        return err;
    snprintf(diag->field, sizeof diag->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(diag->msg, sizeof diag->msg, fmt, ap);
    va_end(ap);
    utf8_trim(diag->field, sizeof diag->field);
    utf8_trim(diag->msg, sizeof diag->msg);
    return err;
}

/* See error.h. */
void as_diag_prefix_field(as_diag *diag, const char *prefix)
{
    if (!diag || !prefix || !*prefix)
        return;
    char tmp[sizeof diag->field];
    const char *sep = (diag->field[0] == '\0' || diag->field[0] == '[') ? "" : ".";
    snprintf(tmp, sizeof tmp, "%s%s%s", prefix, sep, diag->field);
    utf8_trim(tmp, sizeof tmp);
    memcpy(diag->field, tmp, sizeof tmp);
}
