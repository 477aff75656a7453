/* kubeconfig.c - connection settings from a kubeconfig or the service account. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentsched/base/doc.h"
#include "agentsched/k8s/kubeconfig.h"

#define KUBECONFIG_CAP ((size_t)16 << 20)
#define SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"

/* See kubeconfig.h. */
void k8s_conn_free(k8s_conn *c)
{
    if (!c)
        return;
    free(c->server);
    free(c->context);
    free(c->ca_file);
    free(c->ca_data.data);
    free(c->tls_server_name);
    free(c->token);
    free(c->token_file);
    free(c->cert_file);
    free(c->cert_data.data);
    free(c->key_file);
    free(c->key_data.data);
    free(c->username);
    free(c->password);
    free(c);
}

static int b64_val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

/* See kubeconfig.h. */
as_err k8s_base64_decode(const char *s, size_t len, k8s_blob *out)
{
    out->data = NULL;
    out->len = 0;
    unsigned char *d = malloc(len / 4 * 3 + 4);
    if (!d)
        return AS_ENOMEM;
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    bool pad = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
            continue;
        if (ch == '=') {
            pad = true;
            continue;
        }
        int v = b64_val(ch);
        if (v < 0 || pad) { /* data after padding is malformed too */
            free(d);
            return AS_EINVAL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            d[n++] = (unsigned char)(acc >> bits);
        }
    }
    if (bits >= 6) { /* a lone trailing sextet cannot encode a byte */
        free(d);
        return AS_EINVAL;
    }
    d[n] = 0;
    out->data = d;
    out->len = n;
    return AS_OK;
}

/* Looks up the entry named `name` in the list `list` (clusters/contexts/
 * users). Returns true when found; *inner gets its `inner` mapping or NULL
 * when that is missing or not a mapping. */
static bool named_entry(json_t *root, const char *list, const char *inner, const char *name,
                        int *index, json_t **innerp)
{
    json_t *arr = json_object_get(root, list);
    *innerp = NULL;
    if (!json_is_array(arr))
        return false;
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && strcmp(n, name) == 0) {
            *index = (int)i;
            json_t *o = json_object_get(e, inner);
            *innerp = json_is_object(o) ? o : NULL;
            return true;
        }
    }
    return false;
}

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Resolves a kubeconfig path relative to the kubeconfig's directory. */
static char *resolve_path(const char *base_dir, const char *p)
{
    if (!p || !*p)
        return NULL;
    if (p[0] == '/' || !base_dir)
        return strdup(p);
    size_t n = strlen(base_dir) + strlen(p) + 2;
    char *r = malloc(n);
    if (r)
        snprintf(r, n, "%s/%s", base_dir, p);
    return r;
}

static as_err check_readable(const char *path, const char *field, const char *what, as_diag *diag)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return as_diag_set(diag, AS_EAUTH, field,
                           "cannot read %s %s: %s; fix the path or its permissions", what, path,
                           strerror(errno));
    fclose(f);
    return AS_OK;
}

static as_err get_str(json_t *obj, const char *key, const char **out, const char *fieldbase,
                      as_diag *diag)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return AS_OK;
    if (!json_is_string(v)) {
        char f[192];
        snprintf(f, sizeof f, "%s.%s", fieldbase, key);
        return as_diag_set(diag, AS_EINVAL, f, "%s must be a string", key);
    }
    *out = json_string_value(v);
    if (!**out)
        *out = NULL;
    return AS_OK;
}

static as_err get_b64(json_t *obj, const char *key, k8s_blob *out, const char *fieldbase,
                      as_diag *diag)
{
    const char *s;
    as_err err = get_str(obj, key, &s, fieldbase, diag);
    if (err || !s)
        return err;
    if (k8s_base64_decode(s, strlen(s), out) != AS_OK) {
        char f[192];
        snprintf(f, sizeof f, "%s.%s", fieldbase, key);
        return as_diag_set(diag, AS_EINVAL, f,
                           "%s is not valid base64; paste the PEM base64-encoded", key);
    }
    return AS_OK;
}

/* See kubeconfig.h. */
as_err k8s_conn_from_kubeconfig(const char *path, const char *context, k8s_conn **out,
                                as_diag *diag)
{
    *out = NULL;
    json_t *root = NULL;
    if (!path || !*path)
        return as_diag_set(diag, AS_EINVAL, "kubeconfig", "no kubeconfig path given");
    as_err err = doc_load_file(path, KUBECONFIG_CAP, false, &root, diag);
    if (err) {
        if (err == AS_EIO && diag && !strstr(diag->msg, "--kubeconfig"))
            snprintf(diag->msg + strlen(diag->msg), sizeof diag->msg - strlen(diag->msg),
                     " (check --kubeconfig)");
        return err;
    }
    err = k8s_conn_from_kubeconfig_json(root, path, context, out, diag);
    json_decref(root);
    return err;
}

/* See kubeconfig.h. */
as_err k8s_conn_from_kubeconfig_json(json_t *root, const char *path, const char *context,
                                     k8s_conn **out, as_diag *diag)
{
    *out = NULL;
    k8s_conn *c = NULL;
    char *dir = NULL;
    char fb[192];
    as_err err;
    if (!path || !*path)
        path = "kubeconfig";
    if (!json_is_object(root)) {
        err = as_diag_set(diag, AS_EPARSE, "", "%s: a kubeconfig must be a mapping", path);
        goto done;
    }
    c = calloc(1, sizeof *c);
    if (!c) {
        err = AS_ENOMEM;
        goto done;
    }
    {
        const char *slash = strrchr(path, '/');
        dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : NULL;
        if (!dir && slash) {
            err = AS_ENOMEM;
            goto done;
        }
    }
    const char *ctxname = context;
    if (!ctxname || !*ctxname) {
        ctxname = json_string_value(json_object_get(root, "current-context"));
        if (!ctxname || !*ctxname) {
            err = as_diag_set(diag, AS_ENOTFOUND, "current-context",
                              "%s has no current-context; set one (kubectl config use-context) or "
                              "pass a context",
                              path);
            goto done;
        }
    }
    int ci = -1, cli = -1, ui = -1;
    json_t *ctx, *cl, *u;
    if (!named_entry(root, "contexts", "context", ctxname, &ci, &ctx) || !ctx) {
        err = as_diag_set(diag, AS_ENOTFOUND, "contexts",
                          "%s: context \"%s\" not found; list them with kubectl config "
                          "get-contexts",
                          path, ctxname);
        goto done;
    }
    const char *cluster_name = json_string_value(json_object_get(ctx, "cluster"));
    const char *user_name = json_string_value(json_object_get(ctx, "user"));
    if (!cluster_name || !*cluster_name) {
        snprintf(fb, sizeof fb, "contexts[%d].context.cluster", ci);
        err = as_diag_set(diag, AS_ENOTFOUND, fb, "%s: context \"%s\" names no cluster", path,
                          ctxname);
        goto done;
    }
    if (!named_entry(root, "clusters", "cluster", cluster_name, &cli, &cl) || !cl) {
        err = as_diag_set(diag, AS_ENOTFOUND, "clusters",
                          "%s: cluster \"%s\" (of context \"%s\") not found or empty", path,
                          cluster_name, ctxname);
        goto done;
    }
    snprintf(fb, sizeof fb, "clusters[%d].cluster", cli);
    const char *server, *ca, *tsn;
    if ((err = get_str(cl, "server", &server, fb, diag)) ||
        (err = get_str(cl, "certificate-authority", &ca, fb, diag)) ||
        (err = get_str(cl, "tls-server-name", &tsn, fb, diag)) ||
        (err = get_b64(cl, "certificate-authority-data", &c->ca_data, fb, diag)))
        goto done;
    if (!server) {
        err = as_diag_set(diag, AS_EINVAL, fb, "%s: cluster \"%s\" has no server URL", path,
                          cluster_name);
        goto done;
    }
    if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0) {
        char f[192];
        snprintf(f, sizeof f, "%s.server", fb);
        err = as_diag_set(diag, AS_EINVAL, f,
                          "%s: server \"%s\" must start with https:// or http://", path, server);
        goto done;
    }
    c->server = strdup(server);
    if (c->server) {
        size_t n = strlen(c->server);
        while (n > 0 && c->server[n - 1] == '/')
            c->server[--n] = 0;
    }
    json_t *ins = json_object_get(cl, "insecure-skip-tls-verify");
    c->insecure =
        json_is_true(ins) || (json_is_string(ins) && !strcmp(json_string_value(ins), "true"));
    c->tls_server_name = xstrdup(tsn);
    if (ca && !c->ca_data.data) {
        c->ca_file = resolve_path(dir, ca);
        char f[192];
        snprintf(f, sizeof f, "%s.certificate-authority", fb);
        if (c->ca_file && (err = check_readable(c->ca_file, f, "certificate-authority", diag)))
            goto done;
    }
    c->context = strdup(ctxname);

    if (user_name && *user_name) {
        if (!named_entry(root, "users", "user", user_name, &ui, &u)) {
            err = as_diag_set(diag, AS_ENOTFOUND, "users",
                              "%s: user \"%s\" (of context \"%s\") not found", path, user_name,
                              ctxname);
            goto done;
        }
        if (!u)
            goto creds_done;
        snprintf(fb, sizeof fb, "users[%d].user", ui);
        const char *tok, *tokf, *cert, *key, *un, *pw;
        if ((err = get_str(u, "token", &tok, fb, diag)) ||
            (err = get_str(u, "tokenFile", &tokf, fb, diag)) ||
            (err = get_str(u, "client-certificate", &cert, fb, diag)) ||
            (err = get_str(u, "client-key", &key, fb, diag)) ||
            (err = get_str(u, "username", &un, fb, diag)) ||
            (err = get_str(u, "password", &pw, fb, diag)) ||
            (err = get_b64(u, "client-certificate-data", &c->cert_data, fb, diag)) ||
            (err = get_b64(u, "client-key-data", &c->key_data, fb, diag)))
            goto done;
        c->token = xstrdup(tok);
        c->username = xstrdup(un);
        c->password = xstrdup(pw);
        char f[192];
        if (tokf && !tok) {
            c->token_file = resolve_path(dir, tokf);
            snprintf(f, sizeof f, "%s.tokenFile", fb);
            if (c->token_file && (err = check_readable(c->token_file, f, "tokenFile", diag)))
                goto done;
        }
        if (cert && !c->cert_data.data) {
            c->cert_file = resolve_path(dir, cert);
            snprintf(f, sizeof f, "%s.client-certificate", fb);
            if (c->cert_file && (err = check_readable(c->cert_file, f, "client-certificate", diag)))
                goto done;
        }
        if (key && !c->key_data.data) {
            c->key_file = resolve_path(dir, key);
            snprintf(f, sizeof f, "%s.client-key", fb);
            if (c->key_file && (err = check_readable(c->key_file, f, "client-key", diag)))
                goto done;
        }
        bool has_cert = c->cert_file || c->cert_data.data;
        bool has_key = c->key_file || c->key_data.data;
        if (has_cert != has_key) {
            err = as_diag_set(diag, AS_EAUTH, fb,
                              "%s: user \"%s\" has a client %s but no client %s; give both", path,
                              user_name, has_cert ? "certificate" : "key",
                              has_cert ? "key" : "certificate");
            goto done;
        }
        bool has_any = c->token || c->token_file || has_cert || c->username;
        if (!has_any && (json_object_get(u, "exec") || json_object_get(u, "auth-provider"))) {
            err = as_diag_set(diag, AS_EUNSUPPORTED, fb,
                              "%s: user \"%s\" uses an exec/auth-provider plugin, which agentsched "
                              "does not run; use a token, tokenFile or client certificate",
                              path, user_name);
            goto done;
        }
    }
creds_done:
    if (!c->server || !c->context) {
        err = AS_ENOMEM;
        goto done;
    }
    *out = c;
    c = NULL;
    err = AS_OK;
done:
    k8s_conn_free(c);
    free(dir);
    return err;
}

/* See kubeconfig.h. */
as_err k8s_conn_route(const k8s_conn *c, char **url_base, char **connect_to, as_diag *diag)
{
    *url_base = NULL;
    *connect_to = NULL;
    const char *srv = c->server ? c->server : "";
    static const char https[] = "https://";
    if (!c->tls_server_name || !c->tls_server_name[0] ||
        strncasecmp(srv, https, sizeof https - 1) != 0) {
        /* Plain http has no certificate to name: client-go ignores the
         * setting there too. */
        return (*url_base = strdup(srv)) ? AS_OK : AS_ENOMEM;
    }
    if (c->tls_server_name[strspn(c->tls_server_name, "abcdefghijklmnopqrstuvwxyz"
                                                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")])
        return as_diag_set(diag, AS_EINVAL, "tls-server-name",
                           "tls-server-name '%s' is not a DNS name (letters, digits, '.', '-')",
                           c->tls_server_name);
    const char *host = srv + sizeof https - 1;
    const char *rest = host + strcspn(host, "/?#");
    const char *hend; /* one past the host (brackets kept for IPv6) */
    if (*host == '[') {
        const char *rb = memchr(host, ']', (size_t)(rest - host));
        if (!rb)
            return as_diag_set(diag, AS_EINVAL, "server",
                               "server %s: unterminated IPv6 address; write it as "
                               "https://[ADDR]:PORT",
                               srv);
        hend = rb + 1;
    } else {
        hend = memchr(host, ':', (size_t)(rest - host));
        if (!hend)
            hend = rest;
    }
    if (hend == host || (*host == '[' && hend - host <= 2))
        return as_diag_set(diag, AS_EINVAL, "server", "server %s has no host", srv);
    long port = 443;
    if (hend < rest) {
        if (*hend != ':')
            return as_diag_set(diag, AS_EINVAL, "server", "server %s: bad text after the host",
                               srv);
        char *end = NULL;
        port = strtol(hend + 1, &end, 10);
        if (end != rest || hend + 1 == rest || port < 1 || port > 65535)
            return as_diag_set(diag, AS_EINVAL, "server",
                               "server %s: port must be a number from 1 to 65535", srv);
    }
    int hlen = (int)(hend - host);
    int n1 = snprintf(NULL, 0, "https://%s:%ld%s", c->tls_server_name, port, rest);
    int n2 = snprintf(NULL, 0, "%s:%ld:%.*s:%ld", c->tls_server_name, port, hlen, host, port);
    char *u = malloc((size_t)n1 + 1), *t = malloc((size_t)n2 + 1);
    if (!u || !t) {
        free(u);
        free(t);
        return AS_ENOMEM;
    }
    snprintf(u, (size_t)n1 + 1, "https://%s:%ld%s", c->tls_server_name, port, rest);
    snprintf(t, (size_t)n2 + 1, "%s:%ld:%.*s:%ld", c->tls_server_name, port, hlen, host, port);
    *url_base = u;
    *connect_to = t;
    return AS_OK;
}

/* See kubeconfig.h. */
as_err k8s_conn_in_cluster(const char *sa_dir, k8s_conn **out, as_diag *diag)
{
    *out = NULL;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return as_diag_set(
            diag, AS_ENOTFOUND, "in-cluster",
            "KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set: not running "
            "in a pod; use --kubeconfig instead");
    if (!sa_dir)
        sa_dir = SA_DIR_DEFAULT;
    k8s_conn *c = calloc(1, sizeof *c);
    if (!c)
        return AS_ENOMEM;
    as_err err = AS_ENOMEM;
    size_t n = strlen(host) + strlen(port) + 16;
    c->server = malloc(n);
    if (!c->server)
        goto done;
    if (strchr(host, ':'))
        snprintf(c->server, n, "https://[%s]:%s", host, port);
    else
        snprintf(c->server, n, "https://%s:%s", host, port);
    c->token_file = resolve_path(sa_dir, "token");
    c->ca_file = resolve_path(sa_dir, "ca.crt");
    if (!c->token_file || !c->ca_file)
        goto done;
    if ((err = check_readable(c->token_file, "in-cluster.token", "service account token", diag)))
        goto done;
    if (access(c->ca_file, R_OK) != 0) {
        /* No CA: fall back to the system bundle rather than failing. */
        free(c->ca_file);
        c->ca_file = NULL;
    }
    *out = c;
    return AS_OK;
done:
    k8s_conn_free(c);
    return err;
}
