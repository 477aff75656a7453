/*
 * bench_bodies.h - the ExtenderArgs bodies the extender benchmarks send
 * (bench_extender over HTTP, bench_extender_cpu in process), so both
 * measure the same requests: a small agent Pod and 500 NodeNames spread
 * over a 5000-node cache.
 */
#ifndef AGENTSCHED_BENCH_BODIES_H
#define AGENTSCHED_BENCH_BODIES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "agentsched/buf.h"

#define BENCH_NODES 5000
#define BENCH_NAMES 500

/* The Pod of agent number id: its own name and uid (every scheduling
 * cycle brings another pod), the same shape for all. */
#define BENCH_POD_FMT                                                                              \
    "{\"metadata\":{\"name\":\"agent-%llu\",\"namespace\":\"agents\",\"uid\":\"u-agent-%llu\","    \
    "\"labels\":{\"app\":\"agent\"}},\"spec\":{\"schedulerName\":\"agent-scheduler\","             \
    "\"containers\":[{\"name\":\"agent\",\"image\":\"agent:1\",\"resources\":{\"requests\":{"      \
    "\"cpu\":\"500m\",\"memory\":\"1Gi\"},\"limits\":{\"memory\":\"2Gi\"}}}]},"                    \
    "\"status\":{\"phase\":\"Pending\"}}"

/* bench_pod_json writes the Pod of agent id into out[cap]. */
static inline void bench_pod_json(char *out, size_t cap, uint64_t id)
{
    snprintf(out, cap, BENCH_POD_FMT, (unsigned long long)id, (unsigned long long)id);
}

/* bench_names_tail returns (malloc'd) what follows the Pod in a NodeNames
 * body: ,"Nodes":null,"NodeNames":[500 names]} */
static inline char *bench_names_tail(void)
{
    buf b;
    buf_init(&b, 0);
    buf_puts(&b, ",\"Nodes\":null,\"NodeNames\":[");
    for (int i = 0; i < BENCH_NAMES; i++)
        buf_printf(&b, "%s\"node-%05d\"", i ? "," : "", (i * 7919) % BENCH_NODES);
    buf_puts(&b, "]}");
    char *out;
    size_t len;
    buf_take(&b, &out, &len);
    return out;
}

/* bench_pod_args writes {"Pod":<pod id><tail> into out; returns its length
 * (0 when it does not fit). */
static inline size_t bench_pod_args(char *out, size_t cap, uint64_t id, const char *tail)
{
    int n = snprintf(out, cap, "{\"Pod\":" BENCH_POD_FMT "%s", (unsigned long long)id,
                     (unsigned long long)id, tail);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

/* bench_pod_body returns (malloc'd) the NodeNames body of pod id. */
static inline char *bench_pod_body(uint64_t id)
{
    char *tail = bench_names_tail();
    size_t cap = strlen(tail) + 1024;
    char *out = malloc(cap);
    if (out && !bench_pod_args(out, cap, id, tail)) {
        free(out);
        out = NULL;
    }
    free(tail);
    return out;
}

#endif
