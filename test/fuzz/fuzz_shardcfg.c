/*
 * fuzz_shardcfg.c - libFuzzer target for the sharding-controller config:
 * shardcfg_parse on arbitrary bytes (YAML or JSON). On success the
 * config must satisfy the validated invariants and drive an engine over a
 * few nodes; on failure nothing is returned and diag names an origin.
 * Must not crash, hang or leak.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/log.h"
#include "agentsched/shard/shardctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_ERROR);
    shardcfg_config *c = NULL;
    as_diag d;
    memset(&d, 0, sizeof d);
    if (shardcfg_parse((const char *)data, size, "fuzz", &c, &d) != AS_OK) {
        if (c || !strstr(d.msg, "fuzz"))
            abort();
        return 0;
    }
    if (!c || c->n == 0 || c->n > SHARDCFG_MAX_SCHEDULERS || c->sync_period_ms < 1000)
        abort();
    for (size_t i = 0; i < c->n; i++) {
        const shardcfg_sched *s = &c->sched[i];
        if (!s->name || !s->name[0] || !s->type)
            abort();
        for (size_t j = 0; j < s->npol; j++) {
            const shardcfg_policy *p = &s->pol[j];
            if (p->weight < 0 || p->min_util < 0 || p->max_util > 1 || p->min_util > p->max_util)
                abort();
            if (p->kind == SHARDCFG_POL_WARMUP && (!p->label || !p->label_value))
                abort();
        }
    }
    shardctl_engine *e = NULL;
    if (shardctl_engine_new(c, &e) == AS_OK) {
        shardctl_node_info v[4] = {{"a", 100, 1000, NULL, 0},
                                   {"b", 900, 1000, NULL, 0},
                                   {"c", 500, 0, NULL, 0},
                                   {"d", 700, 1000, NULL, 0}};
        shardctl_engine_resync(e, v, 4, 1);
        v[0].cpu_requested = 950;
        shardctl_engine_set_node(e, &v[0], 2);
        shardctl_engine_remove_node(e, "b");
        shardctl_engine_free(e);
    }
    shardcfg_free(c);
    return 0;
}
