/*
 * status.c - pod status conditions (PodScheduled=False for pods the fast
 * path cannot place), as kube-scheduler writes them: a strategic merge
 * patch of pods/{name}/status whose conditions list merges by `type`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/status.h"
#include "agentsched/k8s/mux.h"
#include "internal.h"

/* See status.h. */
as_err k8s_pod_set_condition(k8s_client *k, const char *ns, const char *name, const char *type,
                             const char *status, const char *reason, const char *message,
                             as_diag *diag)
{
    if (!k || !ns || !name || !type || !status)
        return as_diag_set(diag, AS_EINVAL, NULL, "pod condition: missing argument");
    char ts[32];
    clock_rfc3339(clock_now_us(), 0, ts, sizeof ts);
    buf body, resp, path;
    buf_init(&body, 64 << 10);
    buf_init(&resp, 64 << 10);
    buf_init(&path, 2048);
    buf_puts(&body, "{\"status\":{\"conditions\":[{\"type\":");
    buf_json_str(&body, type, strlen(type));
    buf_puts(&body, ",\"status\":");
    buf_json_str(&body, status, strlen(status));
    if (reason) {
        buf_puts(&body, ",\"reason\":");
        buf_json_str(&body, reason, strlen(reason));
    }
    if (message) {
        buf_puts(&body, ",\"message\":");
        buf_json_str(&body, message, strlen(message));
    }
    buf_puts(&body, ",\"lastProbeTime\":null,\"lastTransitionTime\":\"");
    buf_puts(&body, ts);
    buf_puts(&body, "\"}]}}");
    buf_puts(&path, "/api/v1/namespaces/");
    k8s_path_segment(&path, ns);
    buf_puts(&path, "/pods/");
    k8s_path_segment(&path, name);
    buf_puts(&path, "/status");
    as_err err = body.err ? body.err : path.err;
    long code = 0;
    if (err) {
        as_diag_set(diag, err, NULL, "pod %s/%s: condition patch too large", ns, name);
        goto done;
    }
    err = k8s_mux_patch(k, path.data, "application/strategic-merge-patch+json", body.data, body.len,
                        &resp, &code, NULL, diag);
    if (err) {
        /* The contract has one transport failure, timed out or not. */
        if (err == AS_ETIMEOUT)
            err = AS_EIO;
        goto done;
    }
    if (code >= 200 && code < 300)
        err = AS_OK;
    else if (code == 404)
        err = as_diag_set(diag, AS_ENOTFOUND, NULL, "pod %s/%s is gone", ns, name);
    else if (code == 401 || code == 403)
        err = as_diag_set(diag, AS_EAUTH, NULL,
                          "PATCH %s: HTTP %ld (grant pods/status patch to the scheduler)",
                          path.data, code);
    else
        err = as_diag_set(diag, AS_EHTTP, NULL, "PATCH %s: HTTP %ld: %.200s", path.data, code,
                          resp.data ? resp.data : "");
done:
    buf_free(&body);
    buf_free(&resp);
    buf_free(&path);
    return err;
}
