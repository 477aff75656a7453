/*
 * json.h - the JSON layer every decoder reads documents with: a builder
 * of jansson DOMs with caps, fed by a walk of text the validating scanner
 * (jscan.h) passed, or by yajl for what either refuses; rules that leave
 * members out of the DOM; the projection of a span through those rules;
 * iteration over a validated object without a DOM; and a case-insensitive
 * member lookup for Go's encoding/json key rules.
 *
 * Every string and key in a DOM built here is valid UTF-8, checked
 * strictly (utf8.h) by either path, so it may be echoed. An object key
 * may not hold NUL (an escaped zero code point): AS_EINVAL naming the
 * object that holds it ("spec.nodeSelector"), so no reader of keys as C
 * strings sees another key. String values may hold NUL; readers that need
 * C strings reject it themselves.
 *
 * Caps: nesting depth JSON_MAX_DEPTH (AS_ETOOBIG), object keys of at most
 * JSON_MAX_KEY_LEN bytes (AS_ETOOBIG). Syntax errors are AS_EPARSE with
 * the byte offset ("malformed JSON near byte N: ...").
 */
#ifndef AGENTSCHED_JSON_H
#define AGENTSCHED_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentsched/base/error.h"
#include "agentsched/base/jscan.h"

/* the scanner's cap is the builder's: one document, one depth */
#define JSON_MAX_DEPTH   JSCAN_MAX_DEPTH
#define JSON_MAX_KEY_LEN 4096

/*
 * json_parse builds body[0..len) into a jansson DOM with the streaming
 * builder (integers that fit int64 become integers, other numbers reals).
 * Caller owns *out (json_decref). The document is validated by the
 * scanner and then walked into the builder, about half the CPU of a yajl
 * pass on a 5 KB pod (bench_extender's Pod decode line); a document
 * either rejects is parsed by yajl (json_parse_ref) for the error, so
 * acceptance, trees and messages are yajl's, except that a lone surrogate
 * escape decodes to U+FFFD, as in Go (yajl: '?'), and that the builder is
 * stricter than yajl alone: invalid UTF-8 is AS_EPARSE and a key holding
 * NUL AS_EINVAL, by either path.
 */
as_err json_parse(const char *body, size_t len, json_t **out, as_diag *diag);

/*
 * json_skip is one rule of what json_parse_skip leaves out of the tree:
 * the members named in `keys` (NULL-terminated) of every object that sits
 * under a member named `parent`, directly ({"parent": {...}}) or as an
 * item of an array there ({"parent": [{...}]}). Names match exactly. A
 * rule whose parent is "" names members of the root object itself (e.g.
 * {"", {"spec", NULL}}: the document without its top-level spec). A rule
 * table ends with a rule whose parent is NULL; rules past the first 16
 * are ignored (their members are built). Left-out values are still parsed
 * and validated, never allocated: the watch decodes only what the model
 * reads (managedFields, container statuses, node images, ...).
 */
typedef struct json_skip {
    const char *parent;
    const char *const *keys;
} json_skip;

/* json_parse_skip is json_parse leaving out what the rule table skip
 * (borrowed; NULL or empty: nothing) names. */
as_err json_parse_skip(const char *body, size_t len, const json_skip *skip, json_t **out,
                       as_diag *diag);

/* json_parse_validated is json_parse_skip for a span the scanner has
 * validated already (one value, surrounding whitespace allowed): it is
 * only walked, not validated again. */
as_err json_parse_validated(const char *body, size_t len, const json_skip *skip, json_t **out,
                            as_diag *diag);

/* json_parse_ref is json_parse_skip through yajl's tokenizer alone: the
 * reference the tests and fuzzers hold the walk to. */
as_err json_parse_ref(const char *body, size_t len, const json_skip *skip, json_t **out,
                      as_diag *diag);

/*
 * json_project writes into out[0..cap) the JSON text of the validated
 * value span[0..len) less the members the rule table skip (NULL: none)
 * leaves out, the value sitting under the member named parent (its rule
 * applies to the value's own keys; "" or NULL: the document's root), and
 * *outlen its length. What the builder would build of the span, as text:
 * kept keys and values are copied byte for byte (escapes included),
 * without whitespace, so two spans with equal projections build equal
 * DOMs (a memo key that ignores what the model never reads: a Pod's env
 * or probes). The projection is never longer than the span. false, out
 * unspecified, when cap is too small, or when the span holds what the DOM
 * builder refuses or the projection does not follow (a number out of
 * range anywhere, a kept key over JSON_MAX_KEY_LEN, any escaped kept key,
 * nesting deeper than JSON_MAX_DEPTH): build the DOM then.
 */
bool json_project(const char *span, size_t len, const json_skip *skip, const char *parent,
                  char *out, size_t cap, size_t *outlen);

/*
 * Reading the members of a JSON object that the scanner validated (a
 * span of a request, such as an extender's Pod) without building a DOM:
 * for callers that want a few members of a big object. Member order and
 * repeats are the document's (a DOM keeps the last).
 */
typedef struct json_iter {
    const char *p, *end;
    /* A value starting at known is not walked: it ends at known_end (the
     * caller found it already). NULL: none. */
    const char *known, *known_end;
} json_iter;

/* A member's value: type '"' (s/len: the bytes between the quotes, esc
 * when they hold escapes), '{' or '[' (s/len: the whole value, an object
 * or array span of its own), '0' (a number), 't', 'f' or 'n' (true, false,
 * null; s/len the literal). */
typedef struct json_value {
    const char *s;
    size_t len;
    char type;
    bool esc;
} json_value;

/* json_iter_begin starts on the object span[0..len) (validated JSON;
 * leading whitespace allowed); false when it is not an object. */
bool json_iter_begin(json_iter *it, const char *span, size_t len);

/* json_iter_next reads the next member: its key (the bytes between the
 * quotes, *kesc when they hold escapes) and value. 1: a member; 0: the end
 * of the object; -1: the key or the value holds what the DOM builder may
 * refuse (a number out of range, an object key longer than
 * JSON_MAX_KEY_LEN or holding an escaped NUL): build the DOM instead, for
 * its answer. */
int json_iter_next(json_iter *it, const char **key, size_t *klen, bool *kesc, json_value *v);

/*
 * json_check_utf8 holds a string or key yajl handed over (s[0..n)) to
 * utf8_prefix: AS_OK when valid, else AS_EPARSE with diag (may be NULL)
 * saying where, in the scanner's words. body[0..body_len) is the
 * document: a string without escapes points into it, which locates the
 * bad byte; consumed (yajl_get_bytes_consumed) locates the others.
 */
as_err json_check_utf8(const char *body, size_t body_len, size_t consumed, const char *s, size_t n,
                       as_diag *diag);

/*
 * json_get returns obj's member `key`, matched exactly first, else
 * case-insensitively (ASCII), as Go's encoding/json matches field names;
 * NULL when absent or obj is not an object. Borrowed.
 */
json_t *json_get(const json_t *obj, const char *key);

#endif
