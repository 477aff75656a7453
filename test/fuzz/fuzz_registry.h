/*
 * fuzz_registry.h - the resource registry a model fuzzer decodes against
 * (fuzz_pod, fuzz_podscan): one registry made at the first input and kept
 * for the whole run (libFuzzer calls the target in one process).
 */
#ifndef AGENTSCHED_FUZZ_REGISTRY_H
#define AGENTSCHED_FUZZ_REGISTRY_H

#include <string.h>

#include "agentsched/base/log.h"
#include "agentsched/model/registry.h"

/* fuzz_registry_once returns the run's registry, first quieting the log
 * below errors and interning the resource names in names (NULL-ended;
 * names NULL for none). */
static inline model_registry *fuzz_registry_once(const char *const *names)
{
    static model_registry reg;
    static int ready;
    if (!ready) {
        log_set_level(LOG_ERROR);
        model_registry_init(&reg);
        for (size_t i = 0; names && names[i]; i++) {
            int idx;
            model_registry_intern(&reg, names[i], strlen(names[i]), &idx);
        }
        ready = 1;
    }
    return &reg;
}

#endif
