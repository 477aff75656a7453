/*
 * bench_shardctl.c - sharding-controller recompute cost: one node event
 * (incremental) against a full resync, on the same engine and nodes.
 *
 *   bench_shardctl [NODES [EVENTS]]     (default 5000 nodes, 20000 events)
 *
 * Two configs: "unsaturated" (no maxNodes binds: an event reassigns one
 * node) and "capped" (maxNodes binds on two schedulers: an event runs one
 * linear selection pass). For each it prints the CPU time of a full resync
 * (score + sort + select of every node, what a periodic sync or upstream's
 * recompute costs), of one node event, and their ratio. It also prints the
 * cost of the controller's change detection (one tag lookup per node,
 * paid once per batch of events, not per event).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/base/log.h"
#include "agentsched/shard/shardctl.h"
#include "bench_clock.h"

/* Times below are this thread's CPU time (the machine is shared). */

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *cfg_unsat =
    "schedulerConfigs:\n"
    "- name: agent-scheduler\n"
    "  policies:\n"
    "  - {name: allocation-rate, arguments: {minCPUUtil: 0.7, maxCPUUtil: 1.0}}\n"
    "  - {name: warmup, weight: 5}\n"
    "- name: volcano\n"
    "  policies:\n"
    "  - {name: allocation-rate, arguments: {maxCPUUtil: 0.69}}\n";

static const char *cfg_capped =
    "schedulerConfigs:\n"
    "- name: agent-scheduler\n"
    "  policies:\n"
    "  - {name: allocation-rate, arguments: {minCPUUtil: 0.5, maxCPUUtil: 1.0}}\n"
    "  - {name: warmup, weight: 5}\n"
    "  - {name: node-limit, arguments: {maxNodes: 20}}\n"
    "- name: volcano\n"
    "  policies:\n"
    "  - {name: allocation-rate, arguments: {maxCPUUtil: 0.9}}\n"
    "  - {name: node-limit, arguments: {maxNodes: 30}}\n";

static int run(const char *label, const char *text, size_t nn, size_t nev)
{
    shardcfg_config *cfg = NULL;
    as_diag d = {0};
    if (shardcfg_parse(text, strlen(text), label, &cfg, &d)) {
        fprintf(stderr, "config: %s\n", d.msg);
        return 1;
    }
    shardctl_engine *e = NULL;
    if (shardctl_engine_new(cfg, &e))
        return 1;
    char(*names)[24] = malloc(nn * sizeof *names);
    shardctl_node_info *v = calloc(nn, sizeof *v);
    model_kv warm = {"node.volcano.sh/warmup", "true"};
    model_labels wl = {&warm, 1};
    for (size_t i = 0; i < nn; i++) {
        snprintf(names[i], sizeof names[i], "node-%05zu", i);
        v[i] = (shardctl_node_info){names[i], (int64_t)(rnd() % 64001), 64000,
                                    i % 8 == 0 ? &wl : NULL, i};
    }
    /* full resyncs */
    int R = 20;
    double t0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (int r = 0; r < R; r++)
        shardctl_engine_resync(e, v, nn, 1);
    double full = (bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0) / R;
    /* single node events: utilisation of a random node changes */
    t0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (size_t k = 0; k < nev; k++) {
        size_t i = rnd() % nn;
        v[i].cpu_requested = (int64_t)(rnd() % 64001);
        shardctl_engine_set_node(e, &v[i], 1);
    }
    double event = (bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)nev;
    /* change detection: one tag lookup per node */
    t0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (int r = 0; r < R; r++)
        for (size_t i = 0; i < nn; i++)
            shardctl_engine_seen(e, names[i], 2, NULL);
    double scan = (bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0) / R;
    shardctl_engine_stats st;
    shardctl_engine_get_stats(e, &st);
    printf("%-12s nodes=%zu full_resync_us=%.1f node_event_us=%.2f ratio=%.0fx "
           "detect_scan_us=%.1f members=%zu/%zu unfit=%zu capped=%zu fast_updates=%llu "
           "passes=%llu\n",
           label, nn, full * 1e6, event * 1e6, full / event, scan * 1e6, st.members[0],
           st.members[1], st.unfit, st.capped, (unsigned long long)st.fast_updates,
           (unsigned long long)st.passes);
    free(v);
    free(names);
    shardctl_engine_free(e);
    shardcfg_free(cfg);
    return 0;
}

int main(int argc, char **argv)
{
    size_t nn = argc > 1 ? strtoul(argv[1], NULL, 10) : 5000;
    size_t nev = argc > 2 ? strtoul(argv[2], NULL, 10) : 20000;
    if (nn == 0 || nev == 0) {
        fprintf(stderr, "usage: bench_shardctl [NODES [EVENTS]]\n");
        return 2;
    }
    log_set_level(LOG_ERROR); /* unfit-node warnings would dominate */
    return run("unsaturated", cfg_unsat, nn, nev) || run("capped", cfg_capped, nn, nev);
}
