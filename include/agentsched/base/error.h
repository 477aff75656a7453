/*
 * error.h - the one error type of agentsched.
 *
 * Every fallible function returns an as_err and writes its results through
 * out-parameters. Values are fixed forever (they appear in logs and tests):
 * append new ones at the end, never renumber.
 *
 * Functions that read user input (cluster files, HTTP bodies, policies,
 * kubeconfigs) also take an as_diag, into which they write the path of the
 * offending field and a message that tells the user what to do.
 */
#ifndef AGENTSCHED_ERROR_H
#define AGENTSCHED_ERROR_H

#include <stddef.h>

typedef enum as_err {
    AS_OK = 0,
    AS_ENOMEM = 1,        /* allocation failed */
    AS_EINVAL = 2,        /* invalid argument or value (user input) */
    AS_EPARSE = 3,        /* syntax error in JSON/YAML/quantity */
    AS_ERANGE = 4,        /* value out of range / overflow */
    AS_ENOTFOUND = 5,     /* named object does not exist */
    AS_EEXIST = 6,        /* object already exists */
    AS_ECONFLICT = 7,     /* optimistic concurrency lost / bound elsewhere */
    AS_EUNSCHED = 8,      /* pod fits no node */
    AS_EIO = 9,           /* file or socket I/O failed */
    AS_ETOOBIG = 10,      /* a capped buffer would overflow */
    AS_ETIMEOUT = 11,     /* deadline passed */
    AS_EHTTP = 12,        /* remote HTTP error */
    AS_EAUTH = 13,        /* credentials missing or rejected */
    AS_EUNSUPPORTED = 14, /* feature or value not supported */
    AS_ELIMIT = 15,       /* a fixed table is full */
    AS_EGONE = 16,        /* watch resourceVersion expired (HTTP 410) */
    AS_EINTERNAL = 17,    /* broken invariant that was not fatal */
    AS_EAGAIN = 18,       /* not done yet, nothing lost: try again (where it may wait) */
    AS_ERR__COUNT
} as_err;

/* as_strerror returns a static, human-readable name for err (never NULL). */
const char *as_strerror(as_err err);

/*
 * as_diag - where and why user input was rejected.
 * field: path of the offending field, e.g. "items[3].status.allocatable.cpu"
 *        (empty when not tied to a field). msg: a sentence for a human that
 *        names the object and says what to do.
 */
typedef struct as_diag {
    char field[192];
    char msg[320];
} as_diag;

/*
 * as_diag_set formats msg into diag (if diag is non-NULL) and sets its field
 * to `field` (may be NULL). Returns err so callers can `return as_diag_set(...)`.
 */
as_err as_diag_set(as_diag *diag, as_err err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* as_utf8_excerpt is how many bytes of the valid UTF-8 s[0..len) fit in
 * max without splitting a character (len itself when it fits), for
 * messages that quote input: an answer carrying them stays valid UTF-8. */
size_t as_utf8_excerpt(const char *s, size_t len, size_t max);

/* as_printable copies the NUL-terminated src (NULL: "") into dst,
 * truncated to n bytes with its NUL, each byte outside printable ASCII
 * replaced by '?': for logging or answering text a peer sent. */
void as_printable(char *dst, size_t n, const char *src);

/*
 * as_diag_prefix_field prepends `prefix` to diag->field ("items[3]" +
 * ".spec" -> "items[3].spec"). Used as errors bubble up through nested
 * decoders. No-op when diag is NULL.
 */
void as_diag_prefix_field(as_diag *diag, const char *prefix);

#endif
