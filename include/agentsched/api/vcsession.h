/*
 * vcsession.h - the scan of Volcano's onSessionOpen body.
 *
 * vc-scheduler POSTs its whole session (every job and node) at the start
 * of each session, every second by default; agentsched needs nothing from
 * it but a check that the node names are ones its cache holds, so the
 * body is validated and counted in one streaming pass, never built.
 */
#ifndef AGENTSCHED_VCSESSION_H
#define AGENTSCHED_VCSESSION_H

#include <stddef.h>

#include "agentsched/base/error.h"
#include "agentsched/core/cache.h"

/* What vcsession_scan found in an OnSessionOpenRequest. */
typedef struct vcsession_stats {
    size_t jobs;             /* keys of "Jobs" */
    size_t nodes;            /* keys of "Nodes" */
    size_t unknown_nodes;    /* of those, names the cache does not hold */
    char first_unknown[128]; /* the first such name, truncated, with bytes unsafe in
                                a log line shown as '?'; "" if none */
} vcsession_stats;

/*
 * vcsession_scan validates body[0..len) as one JSON object in a
 * single streaming pass (no DOM; numbers are not converted, so Volcano's
 * "infinite" resources of 1.7976931348623157e+308 pass) and fills *out.
 * Node names are looked up in c (read lock per name). Errors: AS_EPARSE
 * (syntax, with the byte offset), AS_EINVAL (not an object), AS_ETOOBIG
 * (nesting beyond JSON_MAX_DEPTH).
 */
as_err vcsession_scan(cache *c, const char *body, size_t len, vcsession_stats *out, as_diag *diag);

#endif
