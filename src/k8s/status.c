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
#include "internal.h"

static size_t status_sink(char *data, size_t size, size_t nmemb, void *arg)
{
    buf *b = arg;
    size_t n = size * nmemb;
    buf_append(b, data, n); /* overflow only truncates the error message */
    return n;
}

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
    buf_printf(&body, ",\"lastProbeTime\":null,\"lastTransitionTime\":\"%s\"}]}}", ts);
    buf_printf(&path, "/api/v1/namespaces/%s/pods/%s/status", ns, name);
    as_err err = body.err ? body.err : path.err;
    CURL *h = NULL;
    char *url = NULL;
    struct curl_slist *hdrs = NULL;
    if (err) {
        as_diag_set(diag, err, NULL, "pod %s/%s: condition patch too large", ns, name);
        goto done;
    }
    if (!k8s_rl_wait(k)) {
        err = as_diag_set(diag, AS_EIO, NULL, "client stopping");
        goto done;
    }
    if (!(h = curl_easy_init()) || !(url = k8s_url(k, path.data))) {
        err = AS_ENOMEM;
        goto done;
    }
    if ((err = k8s_easy_prepare(k, h, url, false, &hdrs)))
        goto done;
    struct curl_slist *t =
        curl_slist_append(hdrs, "Content-Type: application/strategic-merge-patch+json");
    if (!t) {
        err = AS_ENOMEM;
        goto done;
    }
    hdrs = t;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PATCH");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body.len);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, status_sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)k->cfg.request_timeout_ms);
    CURLcode cc = curl_easy_perform(h);
    long code = 0;
    if (cc != CURLE_OK) {
        err = as_diag_set(diag, AS_EIO, NULL, "PATCH %s: %s", path.data, curl_easy_strerror(cc));
        goto done;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
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
    if (h) {
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
        curl_easy_cleanup(h);
    }
    curl_slist_free_all(hdrs);
    free(url);
    buf_free(&body);
    buf_free(&resp);
    buf_free(&path);
    return err;
}
