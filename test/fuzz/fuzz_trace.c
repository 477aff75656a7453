/*
 * fuzz_trace.c - libFuzzer target for the openb trace reader (the CSV
 * files `agentsched replay` reads): the bytes before the first NUL are the
 * node list, the rest the pod list (without a NUL, a one-node list and the
 * whole input as pods). trace_parse must either fail with a message naming
 * a file, or return a trace whose rows hold the documented ranges and
 * whose totals add up; a small trace is then replayed once, in trace order
 * or shuffled, through the decision core. Must not crash, hang or leak.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/log.h"
#include "agentsched/cmd/replay.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"

static const char one_node[] = "sn,cpu_milli,memory_mib,gpu,model\nn1,8000,32768,2,T4\n";

static void check(const trace *t)
{
    int64_t gpu = 0, cpu = 0, mem = 0, demand = 0;
    if (!t->nnodes || !t->npods)
        abort();
    for (size_t i = 0; i < t->nnodes; i++) {
        const trace_node *n = &t->nodes[i];
        if (!n->name || !n->name[0] || n->cpu < 1 || n->mem_mib < 1 || n->gpus < 0 ||
            n->gpus > MODEL_MAX_GPUS || (n->model && !n->model[0]))
            abort();
        gpu += n->gpus * MODEL_GPU_MILLI;
        cpu += n->cpu;
        mem += n->mem_mib;
    }
    for (size_t i = 0; i < t->npods; i++) {
        const trace_pod *p = &t->pods[i];
        if (!p->name || !p->name[0] || p->cpu < 0 || p->mem_mib < 0 || p->num_gpu < 0 ||
            p->num_gpu > MODEL_MAX_GPUS || p->gpu_milli < 0 || p->gpu_milli > MODEL_GPU_MILLI ||
            (p->num_gpu == 0) != (p->gpu_milli == 0) ||
            (p->num_gpu > 1 && p->gpu_milli != MODEL_GPU_MILLI) ||
            (p->deleted != -1 && p->deleted <= p->created) || (p->gpu_spec && !p->gpu_spec[0]))
            abort();
        /* trace order: creation time never goes back */
        if (i && p->created < t->pods[i - 1].created)
            abort();
        demand += p->num_gpu * p->gpu_milli;
    }
    if (gpu != t->gpu_cap || cpu != t->cpu_cap || mem != t->mem_cap || demand != t->gpu_demand)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_ERROR);
    const char *text = (const char *)data;
    const char *nul = memchr(text, 0, size);
    const char *nodes = nul ? text : one_node, *pods = nul ? nul + 1 : text;
    size_t nlen = nul ? (size_t)(nul - text) : sizeof one_node - 1;
    size_t plen = nul ? size - nlen - 1 : size;
    trace *t = NULL;
    as_diag d;
    memset(&d, 0, sizeof d);
    if (trace_parse("nodes.csv", nodes, nlen, "pods.csv", pods, plen, &t, &d) != AS_OK) {
        if (t || !strstr(d.msg, ".csv"))
            abort();
        return 0;
    }
    check(t);
    if (t->nnodes <= 16 && t->npods <= 64) {
        replay_options o = {.inflate = 1.3, .seed = size, .once = true, .shuffle = size & 1};
        replay_result r;
        memset(&d, 0, sizeof d);
        if (replay_run(t, (size & 2) ? "fgd" : "fragment", &o, &r, &d) == AS_OK) {
            if (r.submitted != t->npods || r.placed + r.failed != r.submitted ||
                r.gpu_alloc_ratio_end < 0 || r.gpu_alloc_ratio_end > 1)
                abort();
            replay_result_free(&r);
        }
    }
    trace_free(t);
    return 0;
}
