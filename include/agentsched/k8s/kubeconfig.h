/*
 * kubeconfig.h - connection settings for one API server, from a kubeconfig
 * (YAML or JSON) or the in-cluster service account, and the tls-server-name
 * route libcurl needs. Pure parsing: no thread, no network.
 */
#ifndef AGENTSCHED_K8S_KUBECONFIG_H
#define AGENTSCHED_K8S_KUBECONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentsched/base/error.h"

typedef struct k8s_blob {
    unsigned char *data; /* owned, NULL when absent */
    size_t len;
} k8s_blob;

/*
 * Everything needed to reach one API server. Paths are absolute (relative
 * kubeconfig paths are resolved against the kubeconfig's directory).
 * *_data blobs are decoded PEM and handed to libcurl as memory blobs.
 * All strings owned (NULL when absent); k8s_conn_free releases them.
 */
typedef struct k8s_conn {
    char *server;  /* "https://host:port", no trailing slash */
    char *context; /* context name used (for messages); NULL in-cluster */
    char *ca_file;
    k8s_blob ca_data;
    bool insecure; /* insecure-skip-tls-verify */
    char *tls_server_name;
    char *token;      /* static bearer token */
    char *token_file; /* bearer token re-read when the file changes */
    char *cert_file;
    k8s_blob cert_data;
    char *key_file;
    k8s_blob key_data;
    char *username; /* basic auth (rare) */
    char *password;
} k8s_conn;

/*
 * k8s_conn_from_kubeconfig reads a kubeconfig (YAML or JSON, via doc.h)
 * and resolves `context` (NULL = current-context) to its cluster and user.
 * Errors, each with diag naming the file and field and saying what to do:
 * AS_EIO missing/unreadable file; AS_EPARSE bad YAML; AS_ENOTFOUND unknown
 * or missing context / cluster / user; AS_EINVAL missing server, bad
 * base64; AS_EAUTH unreadable credential files (token, cert, key, CA);
 * AS_EUNSUPPORTED exec/auth-provider plugins without a usable credential.
 * Caller owns *out (k8s_conn_free).
 */
as_err k8s_conn_from_kubeconfig(const char *path, const char *context, k8s_conn **out,
                                as_diag *diag);

/*
 * k8s_conn_from_kubeconfig_json is the same on an already parsed document
 * (borrowed). path names the file in messages, and relative credential
 * paths resolve against its directory (NULL: "kubeconfig", the cwd).
 */
as_err k8s_conn_from_kubeconfig_json(json_t *root, const char *path, const char *context,
                                     k8s_conn **out, as_diag *diag);

/*
 * k8s_conn_in_cluster builds the in-cluster settings from
 * KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT and the service
 * account directory sa_dir (NULL = /var/run/secrets/kubernetes.io/
 * serviceaccount): token file (re-read when it rotates) and ca.crt.
 * AS_ENOTFOUND when the variables are unset, AS_EAUTH when the token is
 * unreadable. Caller owns *out.
 */
as_err k8s_conn_in_cluster(const char *sa_dir, k8s_conn **out, as_diag *diag);

/* k8s_conn_free releases conn and every string/blob in it. NULL ok. */
void k8s_conn_free(k8s_conn *conn);

/*
 * k8s_conn_route applies tls-server-name the way client-go does (the name
 * the server's certificate is checked against and sent as SNI, while the
 * connection still goes to the server's address). For an https server
 * with tls_server_name set, *url_base is the server URL with its host
 * replaced by that name and *connect_to the libcurl CURLOPT_CONNECT_TO
 * entry "NAME:PORT:HOST:PORT" sending those requests to the real address;
 * otherwise *url_base is a copy of server and *connect_to NULL. Both owned
 * by the caller (free). AS_EINVAL (diag names "server") when the server
 * URL has no host or a bad port; AS_ENOMEM.
 */
as_err k8s_conn_route(const k8s_conn *conn, char **url_base, char **connect_to, as_diag *diag);

/*
 * k8s_base64_decode decodes standard base64 (padding optional, whitespace
 * ignored) into a malloc'ed blob. AS_EINVAL on bad input.
 */
as_err k8s_base64_decode(const char *s, size_t len, k8s_blob *out);

#endif
