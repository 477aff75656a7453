/*
 * fuzz_kubeconfig.c - libFuzzer target for kubeconfig decoding: YAML/JSON
 * through doc_parse, then k8s_conn_from_kubeconfig_json with the current
 * context and with a context named by the input, and the resulting server
 * and tls-server-name through k8s_conn_route. Must not crash or leak.
 */
#include <stdint.h>
#include <stdlib.h>

#include "agentsched/base/doc.h"
#include "agentsched/k8s/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *root = NULL;
    as_diag d;
    if (doc_parse((const char *)data, size, false, &root, &d) != AS_OK)
        return 0;
    k8s_conn *c = NULL;
    /* Relative credential paths resolve under a directory that does not exist. */
    if (k8s_conn_from_kubeconfig_json(root, "/nonexistent-fuzz/kubeconfig", NULL, &c, &d) ==
        AS_OK) {
        if (!c || !c->server)
            abort();
        /* The server URL and tls-server-name are routed as the client
         * would: either both outputs (url) or an error and neither. */
        char *url = NULL, *to = NULL;
        if (k8s_conn_route(c, &url, &to, &d) == AS_OK) {
            if (!url || (to && !c->tls_server_name))
                abort();
        } else if (url || to) {
            abort();
        }
        free(url);
        free(to);
        k8s_conn_free(c);
    } else if (c) {
        abort();
    }
    const char *ctx = json_string_value(json_object_get(root, "fuzz-context"));
    if (ctx && k8s_conn_from_kubeconfig_json(root, NULL, ctx, &c, &d) == AS_OK)
        k8s_conn_free(c);
    json_decref(root);
    return 0;
}
