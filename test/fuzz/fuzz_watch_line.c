/*
 * fuzz_watch_line.c - libFuzzer target for the incremental watch decoder.
 *
 * Input: byte 0 picks the kind (node/pod), byte 1 the split point; the rest
 * is fed as a watch stream in two pieces (and after an error, the stream is
 * reset and the remainder fed again, as the reflector does on reconnect).
 * Nothing may crash, leak or break the cache invariants.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "agentsched/core/cache.h"
#include "agentsched/k8s/watch.h"
#include "agentsched/base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    log_set_level(LOG_ERROR);
    k8s_kind kind = (data[0] & 1) ? K8S_KIND_POD : K8S_KIND_NODE;
    const char *body = (const char *)data + 2;
    size_t len = size - 2;
    size_t split = len ? (size_t)data[1] * len / 255 : 0;
    model_registry reg;
    model_registry_init(&reg);
    cache *c = NULL;
    if (cache_new(&reg, &c) != AS_OK)
        abort();
    k8s_stream *s = NULL;
    /* A small cap so the oversized-line path is reachable. */
    if (k8s_stream_new(kind, c, NULL, 4096, &s) != AS_OK)
        abort();
    if (k8s_stream_feed(s, body, split) != AS_OK)
        k8s_stream_reset(s, NULL);
    if (k8s_stream_feed(s, body + split, len - split) != AS_OK)
        k8s_stream_reset(s, NULL);
    as_diag d;
    if (cache_check_invariants(c, &d) != AS_OK) {
        fprintf(stderr, "invariant broken: %s\n", d.msg);
        abort();
    }
    k8s_stream_free(s);
    cache_free(c);
    model_registry_destroy(&reg);
    return 0;
}
