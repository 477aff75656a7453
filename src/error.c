/* error.c - as_err names and diagnostics. */
#include "agentsched/error.h"

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
};

/* See error.h. */
const char *as_strerror(as_err err)
{
    if ((int)err < 0 || err >= AS_ERR__COUNT || !err_names[err])
        return "unknown error";
    return err_names[err];
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
    memcpy(diag->field, tmp, sizeof tmp);
}
