/*
 * fuzz_volcano.c - libFuzzer target for the Volcano extender verbs.
 *
 * The first input byte picks the verb, the rest is the request body, run
 * through the handler the way the HTTP server would (NUL-terminated copy,
 * a fresh request pool) against the small Volcano test cluster. Every
 * answer must be a JSON object with a status of 200 or 4xx/5xx; 4xx/5xx
 * answers must carry "error" and "field". allocateFunc can leave pods
 * assumed in the shared cache, so after each input the cache invariants
 * must still hold (no overcommit by assumed pods). ASan/UBSan catch the
 * rest. The checks abort() rather than assert(): fuzz builds are
 * RelWithDebInfo, where NDEBUG turns assert() off. Seeds:
 * test/unit/data/volcano/<verb>/<case>/request.json with the verb's index byte prepended.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"
#include "fuzz_svc.h"
#include "agentsched/api/volcano.h"

static svc *fuzz_svc;

static void check(bool ok, const char *what, const char *path)
{
    if (!ok) {
        fprintf(stderr, "fuzz_volcano: %s: %s\n", path, what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_svc_once(&fuzz_svc, AGENTSCHED_SOURCE_DIR "/test/unit/data/volcano/cluster.yaml",
                  "fuzz_volcano");
    if (size < 1)
        return 0;
    /* The Volcano verbs are the /volcano/ entries of the service's table. */
    size_t nall = 0, nroutes = 0;
    const http_route *all = svc_routes(fuzz_svc, &nall);
    const http_route *routes[32];
    for (size_t i = 0; i < nall && nroutes < 32; i++)
        if (strncmp(all[i].path, "/volcano/", 9) == 0)
            routes[nroutes++] = &all[i];
    const http_route *r = routes[data[0] % nroutes];
    size_t len = size - 1;
    char *body = malloc(len + 1);
    memcpy(body, data + 1, len);
    body[len] = '\0';
    http_request req = {.method = "POST",
                        .path = r->path,
                        .body = body,
                        .body_len = len,
                        .pool = pool_new((size_t)16 << 20)};
    http_response resp = {.status = 200, .content_type = "application/json"};
    buf_init(&resp.body, (size_t)16 << 20);
    r->fn(r->ctx, &req, &resp);

    json_t *v = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, 0, NULL);
    check(resp.body.err == AS_OK, "response buffer error", r->path);
    check(v && json_is_object(v), "answer is not a JSON object", r->path);
    if (resp.status != 200) {
        check(resp.status >= 400 && resp.status < 600, "unexpected status", r->path);
        check(json_is_string(json_object_get(v, "error")), "error body without \"error\"", r->path);
        check(json_is_string(json_object_get(v, "field")), "error body without \"field\"", r->path);
    }
    json_decref(v);
    as_diag d = {{0}, {0}};
    check(cache_check_invariants(fuzz_svc->core->cache, &d) == AS_OK, d.msg, r->path);

    buf_free(&resp.body);
    pool_free(req.pool);
    free(body);
    return 0;
}
