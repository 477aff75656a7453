/*
 * model_priv.h - helpers shared by the model decoders (src/model/ only).
 *
 * Every decoder carries a model_priv_ctx: the pool the object's strings go
 * into, the caller's diag, and the object's display name ("pod ns/name"),
 * so every error names the object, the field path and what to do.
 */
#ifndef AGENTSCHED_MODEL_PRIV_H
#define AGENTSCHED_MODEL_PRIV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/pool.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/pod.h"

#define MODEL_PRIV_PATH_MAX 192

typedef struct model_priv_ctx {
    pool *pool;     /* destination of every copied string */
    as_diag *diag;  /* may be NULL */
    char what[200]; /* "pod default/web-1", "node gpu-3" */
} model_priv_ctx;

/* model_priv_fail formats "<what>: <field>: <message>" into diag->msg and
 * sets diag->field to field. Returns err. */
as_err model_priv_fail(model_priv_ctx *c, as_err err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* model_priv_oom reports an allocation failure for the object. */
as_err model_priv_oom(model_priv_ctx *c, const char *field);

/* model_priv_path writes a then b into dst (n bytes), cut to fit as
 * snprintf("%s%s") would: field paths are built per decoded object, so
 * without printf. */
static inline void model_priv_path(char *dst, size_t n, const char *a, const char *b)
{
    size_t i = 0;
    if (!n)
        return;
    for (; *a && i + 1 < n; a++)
        dst[i++] = *a;
    for (; *b && i + 1 < n; b++)
        dst[i++] = *b;
    dst[i] = 0;
}

/* model_priv_path_idx writes a + "[" + idx + "]" into dst (n bytes), cut
 * to fit. */
static inline void model_priv_path_idx(char *dst, size_t n, const char *a, size_t idx)
{
    char t[24], *o = t + sizeof t;
    *--o = 0;
    *--o = ']';
    do {
        *--o = (char)('0' + idx % 10);
        idx /= 10;
    } while (idx);
    *--o = '[';
    model_priv_path(dst, n, a, o);
}

/* model_priv_path_key writes base + ".key" (or base + "[key]" when key has
 * characters other than [A-Za-z0-9_-], e.g. "nvidia.com/gpu") into dst. */
void model_priv_path_key(char *dst, size_t n, const char *base, const char *key);

/* model_priv_key checks a map key (key[0..klen), klen from jansson, not
 * strlen) of the object at path: a key holding NUL (an escaped zero code
 * point) is AS_EINVAL, since every reader takes keys as C strings and
 * would see another key ("cpu\u0000x" as "cpu"). The request decoders
 * refuse such keys already; this guards DOMs from anywhere else. */
as_err model_priv_key(model_priv_ctx *c, const char *key, size_t klen, const char *path);

/* model_priv_type_name names a JSON value's type for messages ("a number"). */
const char *model_priv_type_name(const json_t *v);

/*
 * model_priv_get fetches obj[key] expecting `want` (JSON_OBJECT, JSON_ARRAY,
 * JSON_STRING, JSON_TRUE for booleans, JSON_INTEGER). Absent or JSON null
 * -> *out = NULL and AS_OK. Present with another type -> AS_EINVAL naming
 * `path`. obj may be NULL (treated as empty).
 */
as_err model_priv_get(model_priv_ctx *c, const json_t *obj, const char *key, const char *path,
                      json_type want, const json_t **out);

/* model_priv_str copies a JSON string (must be one) into the pool. */
as_err model_priv_str(model_priv_ctx *c, const json_t *v, const char *path, const char **out);

/* model_priv_str_is reports whether the JSON string v is exactly lit (by
 * length: "Pod\u0000x" is not "Pod"). */
bool model_priv_str_is(const json_t *v, const char *lit);

/* model_priv_get_str = model_priv_get(JSON_STRING) + copy; *out = dflt when
 * absent (dflt is stored as is, not copied). */
as_err model_priv_get_str(model_priv_ctx *c, const json_t *obj, const char *key, const char *path,
                          const char *dflt, const char **out);

/* model_priv_labels decodes a map[string]string (obj may be NULL: empty)
 * into a key-sorted model_labels. */
as_err model_priv_labels(model_priv_ctx *c, const json_t *obj, const char *path, model_labels *out);

/* model_priv_quantity parses a quantity field; errors name path. Negative
 * values are rejected (resources are never negative). */
as_err model_priv_quantity(model_priv_ctx *c, const json_t *v, bool milli, const char *path,
                           int64_t *out);

/* model_priv_rfc3339_ms parses an RFC 3339 timestamp into ms since epoch. */
bool model_priv_rfc3339_ms(const char *s, int64_t *out);

/* model_priv_effect_parse maps NoSchedule/PreferNoSchedule/NoExecute. */
bool model_priv_effect_parse(const char *s, model_effect *out);

/* model_priv_phase_of reads a status.phase (s[0..len), NULL or "" when
 * absent: Pending); false when it is none of the five. The decoder's and
 * the pod scan's reading. */
bool model_priv_phase_of(const char *s, size_t len, model_phase *out);

#endif
