/*
 * gpushare.c - the GPU share advertiser's decision and patch body
 * (gpushare.h): pure functions over a Node's JSON.
 */
#include "agentsched/model/gpushare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/model/pod.h"
#include "agentsched/model/quantity.h"

/* Reads status.<list>[name] as an integer; false when absent or bad. */
static bool read_quantity(const json_t *node, const char *list, const char *name, int64_t *out)
{
    const json_t *v = json_object_get(json_object_get(json_object_get(node, "status"), list), name);
    *out = 0;
    if (!v || json_is_null(v))
        return false;
    int64_t q = 0;
    if (model_quantity_from_json(v, false, &q, NULL) != AS_OK || q < 0) {
        return false;
    }
    *out = q;
    return true;
}

static bool opted_out(const json_t *node)
{
    const char *v = json_string_value(
        json_object_get(json_object_get(json_object_get(node, "metadata"), "annotations"),
                        GPUSHARE_OPT_OUT_ANNOTATION));
    return v && strcmp(v, "off") == 0;
}

/* See gpushare.h. */
void gpushare_decide(const json_t *node, const char *gpu_name, const char *share_name,
                     gpushare_state *st, int64_t now_ms, gpushare_decision *out)
{
    memset(out, 0, sizeof *out);
    int64_t devices = 0;
    if (!read_quantity(node, "allocatable", gpu_name, &devices))
        read_quantity(node, "capacity", gpu_name, &devices);
    out->devices = devices;
    out->want = devices > INT64_MAX / MODEL_GPU_MILLI ? 0 : devices * MODEL_GPU_MILLI;
    out->has_cap = read_quantity(node, "capacity", share_name, &out->cap);
    out->has_alloc = read_quantity(node, "allocatable", share_name, &out->alloc);
    if (opted_out(node)) {
        out->action = GPUSHARE_OPTED_OUT;
        return;
    }
    if (st->stood_down && st->devices != devices) {
        st->stood_down = false; /* the node changed: look again */
        st->overwrites = 0;
        st->wrote = false;
    }
    if (st->stood_down) {
        out->action = GPUSHARE_STOOD_DOWN;
        return;
    }
    bool right = devices > 0 ? out->has_cap && out->has_alloc && out->cap == out->want &&
                                   out->alloc == out->want
                             : !out->has_cap && !out->has_alloc;
    if (right) {
        out->action = GPUSHARE_NOOP;
        return;
    }
    /* Our value was there and someone replaced it, the devices unchanged. */
    if (st->wrote && st->devices == devices && devices > 0) {
        if (!st->overwrites || now_ms - st->first_overwrite_ms > GPUSHARE_FIGHT_WINDOW_MS) {
            st->overwrites = 0;
            st->first_overwrite_ms = now_ms;
        }
        if (++st->overwrites >= GPUSHARE_FIGHT_LIMIT) {
            st->stood_down = true;
            out->newly_stood_down = true;
            out->action = GPUSHARE_STOOD_DOWN;
            return;
        }
    }
    out->action = devices > 0 ? GPUSHARE_SET : GPUSHARE_REMOVE;
}

/* See gpushare.h. */
void gpushare_wrote(gpushare_state *st, const gpushare_decision *d)
{
    if (d->action != GPUSHARE_SET && d->action != GPUSHARE_REMOVE)
        return;
    st->wrote = d->action == GPUSHARE_SET;
    st->written = d->action == GPUSHARE_SET ? d->want : 0;
    st->devices = d->devices;
}

/* See gpushare.h. */
char *gpushare_patch_body(const char *share_name, const gpushare_decision *d)
{
    json_t *v = NULL;
    if (d->action == GPUSHARE_SET) {
        char q[32];
        snprintf(q, sizeof q, "%lld", (long long)d->want);
        v = json_string(q);
    } else if (d->action == GPUSHARE_REMOVE) {
        v = json_null();
    } else {
        return NULL;
    }
    json_t *body = json_pack("{s:{s:{s:O},s:{s:O}}}", "status", "capacity", share_name, v,
                             "allocatable", share_name, v);
    json_decref(v);
    char *s = body ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(body);
    return s;
}
