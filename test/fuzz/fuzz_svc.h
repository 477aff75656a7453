/*
 * fuzz_svc.h - the service a handler fuzzer runs against: one svc loaded
 * with a fixture cluster at the first input and kept for the whole run
 * (libFuzzer calls the target in one process).
 */
#ifndef AGENTSCHED_FUZZ_SVC_H
#define AGENTSCHED_FUZZ_SVC_H

#include <stdio.h>
#include <stdlib.h>

#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"

/* fuzz_svc_once returns *s, first creating it with the cluster file at
 * cluster (a path under the source tree); aborts naming `who` when that
 * fails, since no input could be tried. */
static inline svc *fuzz_svc_once(svc **s, const char *cluster, const char *who)
{
    if (*s)
        return *s;
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.log_level = 0;
    as_diag d = {{0}, {0}};
    if (svc_new(&cfg, s, &d) != AS_OK || svc_load_cluster(*s, cluster, &d) != AS_OK) {
        fprintf(stderr, "%s: setup failed: %s\n", who, d.msg);
        abort();
    }
    log_set_level(LOG_ERROR);
    return *s;
}

#endif
