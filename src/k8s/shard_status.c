/*
 * shard_status.c - NodeShard writes (shard.volcano.sh/v1alpha1): the
 * coordinator's status merge patch and the controller's spec.nodesDesired,
 * both through k8s_mux_patch (k8s_request always sends application/json, which
 * the API server refuses for PATCH).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/buf.h"
#include "agentsched/k8s/shard_status.h"
#include "agentsched/k8s/mux.h"
#include "internal.h"

#define SHARD_API "/apis/shard.volcano.sh/v1alpha1/nodeshards"
/* A create answers with the whole NodeShard, thousands of node names:
 * room for any object etcd stores (1.5 MiB). A patch's answer is cut at
 * its cap instead (mux.h), so there the cap only bounds an error's text. */
#define SHARD_RESP_CAP ((size_t)2 << 20)

static as_err status_err(const char *what, const char *name, long code, const buf *resp,
                         as_diag *diag)
{
    if (code >= 200 && code < 300)
        return AS_OK;
    if (code == 404)
        return as_diag_set(diag, AS_ENOTFOUND, NULL,
                           "%s NodeShard %s: not found (is the NodeShard CRD installed? see "
                           "deploy/crds/nodeshard.yaml)",
                           what, name);
    if (code == 401 || code == 403)
        return as_diag_set(diag, AS_EAUTH, NULL,
                           "%s NodeShard %s: HTTP %ld (grant nodeshards and nodeshards/status "
                           "to this service account)",
                           what, name, code);
    if (code == 409)
        return as_diag_set(diag, AS_ECONFLICT, NULL, "%s NodeShard %s: conflict: %.200s", what,
                           name, resp->data ? resp->data : "");
    return as_diag_set(diag, AS_EHTTP, NULL, "%s NodeShard %s: HTTP %ld: %.200s", what, name, code,
                       resp->data ? resp->data : "");
}

static bool name_ok(const char *name)
{
    if (!name || !*name || strlen(name) > 253)
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return false;
    return true;
}

/* Merge-patches NodeShard name (sub: "/status" for the status subresource,
 * else "") with doc; *code and resp get the API server's answer. */
static as_err shard_patch(k8s_client *k, const char *name, const char *sub, const json_t *doc,
                          buf *resp, long *code, as_diag *diag)
{
    as_err err = AS_OK;
    char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    buf path;
    buf_init(&path, 512);
    if (!body) {
        err = AS_ENOMEM;
        goto done;
    }
    buf_printf(&path, SHARD_API "/%s%s", name, sub);
    if ((err = path.err))
        goto done;
    err = k8s_mux_patch(k, path.data, "application/merge-patch+json", body, strlen(body), resp,
                        code, NULL, diag);
done:
    free(body);
    buf_free(&path);
    return err;
}

/* See shard_status.h. */
as_err k8s_shard_patch_status(k8s_client *k, const char *name, const json_t *status, as_diag *diag)
{
    if (!k || !name_ok(name) || !json_is_object(status))
        return as_diag_set(diag, AS_EINVAL, NULL,
                           "NodeShard status: bad name or status (names are DNS subdomains)");
    buf resp;
    buf_init(&resp, 64 << 10);
    long code = 0;
    json_t *doc = json_pack("{s:O}", "status", (json_t *)status);
    as_err err = shard_patch(k, name, "/status", doc, &resp, &code, diag);
    if (!err)
        err = status_err("status of", name, code, &resp, diag);
    json_decref(doc);
    buf_free(&resp);
    return err;
}

/* See shard_status.h. */
as_err k8s_shard_put_desired(k8s_client *k, const char *name, const char *const *nodes, size_t n,
                             as_diag *diag)
{
    if (!k || !name_ok(name))
        return as_diag_set(diag, AS_EINVAL, NULL, "NodeShard %s: bad name (a DNS subdomain)",
                           name ? name : "(null)");
    as_err err = AS_OK;
    char *body = NULL;
    buf resp;
    buf_init(&resp, SHARD_RESP_CAP);
    json_t *arr = json_array();
    json_t *doc = NULL;
    if (!arr) {
        err = AS_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(arr, json_string(nodes[i]))) {
            err = AS_ENOMEM;
            goto done;
        }
    doc = json_pack("{s:{s:O}}", "spec", "nodesDesired", arr);
    long code = 0;
    if ((err = shard_patch(k, name, "", doc, &resp, &code, diag)))
        goto done;
    if (code == 404) {
        /* Absent: create it. */
        json_decref(doc);
        doc = json_pack("{s:s,s:s,s:{s:s},s:{s:O}}", "apiVersion", "shard.volcano.sh/v1alpha1",
                        "kind", "NodeShard", "metadata", "name", name, "spec", "nodesDesired", arr);
        if (!doc || !(body = json_dumps(doc, JSON_COMPACT))) {
            err = AS_ENOMEM;
            goto done;
        }
        buf_reset(&resp);
        if ((err = k8s_request(k, "POST", SHARD_API, body, strlen(body), &resp, &code, diag)))
            goto done;
    }
    err = status_err("spec of", name, code, &resp, diag);
done:
    json_decref(doc);
    json_decref(arr);
    free(body);
    buf_free(&resp);
    return err;
}
