/*
 * fuzz_placement.c - libFuzzer target for POST /v1/placements bodies.
 *
 * Feeds arbitrary bytes to placement_eval against the small test cluster;
 * on success the answer must be valid JSON with one placement per pod, on
 * failure the diagnostic must be set. ASan/UBSan catch the rest.
 * Seeds: test/unit/data/placement/<case>/request.json.
 */
#include <assert.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "agentsched/base/log.h"
#include "agentsched/api/placement.h"
#include "agentsched/serve/svc.h"
#include "fuzz_svc.h"

static svc *fuzz_svc;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Set up on first use: the service lives for the whole fuzzing run. */
    fuzz_svc_once(&fuzz_svc, AGENTSCHED_SOURCE_DIR "/test/unit/data/placement/cluster.yaml",
                  "fuzz_placement");
    buf out;
    buf_init(&out, 1 << 24);
    as_diag d = {{0}, {0}};
    as_err err = placement_eval(fuzz_svc->core, (const char *)data, size, &out, &d);
    if (err == AS_OK) {
        json_t *r = json_loadb(out.data, out.len, 0, NULL);
        assert(r && json_is_array(json_object_get(r, "placements")));
        json_decref(r);
    } else {
        assert(d.msg[0] != '\0' || err == AS_ENOMEM);
    }
    buf_free(&out);
    return 0;
}
