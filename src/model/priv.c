/* priv.c - helpers shared by the model decoders (see model_priv.h). */
#include "model_priv.h"
#include "agentsched/model/quantity.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* See model_priv.h. */
as_err model_priv_fail(model_priv_ctx *c, as_err err, const char *field, const char *fmt, ...)
{
    if (!c->diag)
        return err;
    char body[sizeof c->diag->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (field && *field)
        return as_diag_set(c->diag, err, field, "%s: %s: %s", c->what, field, body);
    return as_diag_set(c->diag, err, field, "%s: %s", c->what, body);
}

/* See model_priv.h. */
as_err model_priv_oom(model_priv_ctx *c, const char *field)
{
    return model_priv_fail(c, AS_ENOMEM, field,
                           "out of memory while decoding (object larger than its pool cap?)");
}

static bool key_is_simple(const char *key)
{
    if (!*key)
        return false;
    for (const char *p = key; *p; p++) {
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
            return false;
    }
    return true;
}

/* See model_priv.h. */
void model_priv_path_key(char *dst, size_t n, const char *base, const char *key)
{
    if (key_is_simple(key))
        snprintf(dst, n, "%s%s%s", base, *base ? "." : "", key);
    else
        snprintf(dst, n, "%s[%s]", base, key);
}

/* See model_priv.h. */
as_err model_priv_key(model_priv_ctx *c, const char *key, size_t klen, const char *path)
{
    if (memchr(key, '\0', klen))
        return model_priv_fail(c, AS_EINVAL, path,
                               "a key contains \\u0000 (a NUL character); remove it");
    return AS_OK;
}

/* See model_priv.h. */
const char *model_priv_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "an unknown value";
}

static const char *want_name(json_type t)
{
    switch (t) {
    case JSON_OBJECT:
        return "an object (a map)";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string (quote it in YAML)";
    case JSON_INTEGER:
        return "an integer";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean (true or false)";
    default:
        return "a value";
    }
}

static bool type_ok(const json_t *v, json_type want)
{
    switch (want) {
    case JSON_TRUE:
    case JSON_FALSE:
        return json_is_boolean(v);
    default:
        return json_typeof(v) == want;
    }
}

/* See model_priv.h. */
as_err model_priv_get(model_priv_ctx *c, const json_t *obj, const char *key, const char *path,
                      json_type want, const json_t **out)
{
    *out = NULL;
    if (!obj)
        return AS_OK;
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return AS_OK;
    if (!type_ok(v, want))
        return model_priv_fail(c, AS_EINVAL, path, "must be %s, not %s", want_name(want),
                               model_priv_type_name(v));
    *out = v;
    return AS_OK;
}

/* See model_priv.h. */
as_err model_priv_str(model_priv_ctx *c, const json_t *v, const char *path, const char **out)
{
    if (!json_is_string(v))
        return model_priv_fail(c, AS_EINVAL, path, "must be %s, not %s", want_name(JSON_STRING),
                               model_priv_type_name(v));
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (memchr(s, '\0', len))
        return model_priv_fail(c, AS_EINVAL, path, "contains a NUL character; remove it");
    char *d = pool_strndup(c->pool, s, len);
    if (!d)
        return model_priv_oom(c, path);
    *out = d;
    return AS_OK;
}

/* See model_priv.h. */
bool model_priv_str_is(const json_t *v, const char *lit)
{
    size_t n = strlen(lit);
    return json_string_length(v) == n && memcmp(json_string_value(v), lit, n) == 0;
}

/* See model_priv.h. */
as_err model_priv_get_str(model_priv_ctx *c, const json_t *obj, const char *key, const char *path,
                          const char *dflt, const char **out)
{
    const json_t *v;
    as_err err = model_priv_get(c, obj, key, path, JSON_STRING, &v);
    if (err)
        return err;
    if (!v) {
        *out = dflt;
        return AS_OK;
    }
    return model_priv_str(c, v, path, out);
}

static int kv_cmp(const void *a, const void *b)
{
    return strcmp(((const model_kv *)a)->key, ((const model_kv *)b)->key);
}

/* See model_priv.h. */
as_err model_priv_labels(model_priv_ctx *c, const json_t *obj, const char *path, model_labels *out)
{
    out->items = NULL;
    out->n = 0;
    size_t n = obj ? json_object_size(obj) : 0;
    if (n == 0)
        return AS_OK;
    if (n > UINT32_MAX)
        return model_priv_fail(c, AS_ERANGE, path, "has too many entries");
    model_kv *kv = pool_alloc(c->pool, n * sizeof *kv);
    if (!kv)
        return model_priv_oom(c, path);
    size_t i = 0;
    const char *key;
    size_t klen;
    json_t *val;
    char fp[MODEL_PRIV_PATH_MAX];
    json_object_keylen_foreach((json_t *)obj, key, klen, val)
    {
        as_err err = model_priv_key(c, key, klen, path);
        if (err)
            return err;
        model_priv_path_key(fp, sizeof fp, path, key);
        err = model_priv_str(c, val, fp, &kv[i].value);
        if (err)
            return err;
        kv[i].key = pool_strndup(c->pool, key, klen);
        if (!kv[i].key)
            return model_priv_oom(c, fp);
        i++;
    }
    qsort(kv, n, sizeof *kv, kv_cmp);
    out->items = kv;
    out->n = (uint32_t)n;
    return AS_OK;
}

/* See model_priv.h. */
as_err model_priv_quantity(model_priv_ctx *c, const json_t *v, bool milli, const char *path,
                           int64_t *out)
{
    as_diag tmp = {{0}, {0}};
    as_err err = model_quantity_from_json(v, milli, out, &tmp);
    if (err)
        return model_priv_fail(c, err, path, "%s", tmp.msg);
    if (*out < 0)
        return model_priv_fail(c, AS_EINVAL, path,
                               "must not be negative; use 0 or a positive quantity");
    return AS_OK;
}

static bool take_digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char ch = (*p)[i];
        if (ch < '0' || ch > '9')
            return false;
        v = v * 10 + (ch - '0');
    }
    *p += n;
    *out = v;
    return true;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (no libc timezone
 * state involved). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* See model_priv.h. */
bool model_priv_rfc3339_ms(const char *s, int64_t *out)
{
    const char *p = s;
    int y, mo, d, h, mi, sec;
    if (!take_digits(&p, 4, &y) || *p++ != '-' || !take_digits(&p, 2, &mo) || *p++ != '-' ||
        !take_digits(&p, 2, &d) || (*p != 'T' && *p != 't' && *p != ' '))
        return false;
    p++;
    if (!take_digits(&p, 2, &h) || *p++ != ':' || !take_digits(&p, 2, &mi) || *p++ != ':' ||
        !take_digits(&p, 2, &sec))
        return false;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || sec > 60)
        return false;
    int ms = 0;
    if (*p == '.') {
        p++;
        int nd = 0;
        while (*p >= '0' && *p <= '9') {
            if (nd < 3)
                ms = ms * 10 + (*p - '0');
            nd++;
            p++;
        }
        if (nd == 0)
            return false;
        for (; nd < 3; nd++)
            ms *= 10;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1;
        int oh, om;
        p++;
        if (!take_digits(&p, 2, &oh) || *p++ != ':' || !take_digits(&p, 2, &om) || oh > 23 ||
            om > 59)
            return false;
        off = sign * (oh * 3600 + om * 60);
    } else {
        return false;
    }
    if (*p)
        return false;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
    *out = secs * 1000 + ms;
    return true;
}

/* See model_priv.h. */
bool model_priv_effect_parse(const char *s, model_effect *out)
{
    if (strcmp(s, "NoSchedule") == 0)
        *out = MODEL_EFFECT_NO_SCHEDULE;
    else if (strcmp(s, "PreferNoSchedule") == 0)
        *out = MODEL_EFFECT_PREFER_NO_SCHEDULE;
    else if (strcmp(s, "NoExecute") == 0)
        *out = MODEL_EFFECT_NO_EXECUTE;
    else
        return false;
    return true;
}

/* See model_priv.h. */
bool model_priv_phase_of(const char *s, size_t len, model_phase *out)
{
    static const char *const names[] = {"Pending", "Running", "Succeeded", "Failed", "Unknown"};
    if (!s || !len) {
        *out = MODEL_PHASE_PENDING;
        return true;
    }
    for (int i = 0; i < 5; i++) {
        if (strlen(names[i]) == len && memcmp(s, names[i], len) == 0) {
            *out = (model_phase)i;
            return true;
        }
    }
    return false;
}
