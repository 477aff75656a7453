/*
 * place.c - `agentsched place`: dry-run placement from the command line,
 * offline against a cluster file or through a running server's
 * POST /v1/placements. Both paths print the same table or JSON.
 */
#include "agentsched/cmd/place.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agentsched/base/cli.h"
#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/api/placement.h"
#include "agentsched/core/context.h"

#define PLACE_MAX_PODS_FILE ((size_t)64 << 20)
#define PLACE_MAX_RESPONSE  ((size_t)64 << 20)

enum {
    PLACE_CLUSTER,
    PLACE_SERVER,
    PLACE_FILENAME,
    PLACE_CANDIDATES,
    PLACE_POLICY,
    PLACE_OUTPUT,
    PLACE_TIMEOUT,
    PLACE_CACERT,
    PLACE_CERT,
    PLACE_KEY,
    PLACE_HELP,
};

static const cli_flag place_flags[] = {
    {PLACE_CLUSTER, "--cluster", 0, "FILE",
     "evaluate offline against a Kubernetes List of Nodes and Pods\n"
     "(YAML or JSON, as `kubectl get nodes,pods -A -o yaml` prints it)"},
    {PLACE_SERVER, "--server", 0, "URL",
     "ask a running `agentsched serve` instead (POST URL/v1/placements)"},
    {PLACE_FILENAME, "--filename", 'f', "PODS",
     "the pods: one Pod, a multi-document YAML of Pods, or a List of\n"
     "Pods, in YAML or JSON"},
    {PLACE_CANDIDATES, "--candidates", 0, "K",
     "candidates to report per pod, 1..16 (default 3; with --server,\n"
     "the server's default)"},
    {PLACE_POLICY, "--policy", 0, "FILE",
     "scoring policy file (offline only; a server uses its own policy)"},
    {PLACE_OUTPUT, "--output", 'o', "FMT",
     "table (default) or json (the HTTP API's answer, indented)"},
    {PLACE_TIMEOUT, "--timeout", 0, "S",
     "with --server: give up after S seconds, 1..3600 (default 30)"},
    {PLACE_CACERT, "--cacert", 0, "FILE",
     "with an https:// --server: verify the server's certificate\n"
     "against the CA certificates of FILE (PEM) instead of the\n"
     "system's trusted CAs"},
    {PLACE_CERT, "--cert", 0, "FILE",
     "with an https:// --server: present this client certificate (PEM),\n"
     "as a server started with --tls-client-ca requires; needs --key"},
    {PLACE_KEY, "--key", 0, "FILE", "the private key of --cert (PEM)"},
    {PLACE_HELP, "--help", 'h', NULL, "print this help"},
};

static const cli_spec place_cli = {
    .command = "place",
    .synopsis =
        "Usage:\n"
        "  agentsched place --cluster FILE -f PODS [--candidates K] [--policy FILE]"
        " [-o table|json]\n"
        "  agentsched place --server URL  -f PODS [--candidates K] [-o table|json] [--timeout S]\n"
        "                   [--cacert FILE] [--cert FILE --key FILE]\n"
        "\n"
        "Dry-run placement: for each pod of PODS, in order, print the node it would get, its\n"
        "best candidates with their scores and how many nodes rejected it for which reason.\n"
        "Each pod sees the pods before it as placed. Nothing is bound and nothing changes,\n"
        "neither in the file nor on the server.\n"
        "\n",
    .epilogue = "Exit status: 0 when every pod was evaluated (unplaceable pods are reported with\n"
                "NODE <none> and their reasons), 1 on an error, 2 on a usage error.\n",
    .flags = place_flags,
    .nflags = sizeof place_flags / sizeof place_flags[0],
    /* Scripts may abbreviate long names (--cand): getopt_long, which parsed
     * this command line before, allowed it. */
    .abbrev = true,
};

typedef struct place_opts {
    const char *cluster;
    const char *server;
    const char *pods_path;
    const char *policy;
    const char *cacert; /* CA bundle for the server's certificate */
    const char *cert;   /* client certificate, with key */
    const char *key;
    long candidates; /* 0 = default */
    long timeout_s;
    bool json;
} place_opts;

/* Where a pod came from in the -f file, for error messages. */
typedef struct pod_src {
    json_t *pods;  /* array of pod objects (owned) */
    char **origin; /* per pod: "document 2, items[3]" or "" (owned) */
    size_t n, cap; /* n <= cap <= PLACEMENT_MAX_PODS */
} pod_src;

static void pod_src_free(pod_src *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        free(ps->origin[i]);
    free(ps->origin);
    json_decref(ps->pods);
    memset(ps, 0, sizeof *ps);
}

static int usage_error(const char *fmt, const char *arg)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    cli_refuse(&place_cli, msg);
    return CLI_EXIT_USAGE;
}

static bool is_kind(const json_t *obj, const char *kind)
{
    const json_t *k = json_object_get(obj, "kind");
    return json_is_string(k) && strcmp(json_string_value(k), kind) == 0;
}

/* pod_src_add appends pod (a new reference is taken); AS_ETOOBIG past
 * PLACEMENT_MAX_PODS, the same cap POST /v1/placements has. */
static as_err pod_src_add(pod_src *ps, json_t *pod, const char *origin)
{
    if (ps->n == PLACEMENT_MAX_PODS)
        return AS_ETOOBIG;
    if (ps->n == ps->cap) {
        size_t ncap = ps->cap ? ps->cap * 2 : 16;
        if (ncap > PLACEMENT_MAX_PODS)
            ncap = PLACEMENT_MAX_PODS;
        char **o = realloc(ps->origin, ncap * sizeof *o);
        if (!o)
            return AS_ENOMEM;
        ps->origin = o;
        ps->cap = ncap;
    }
    char **o = ps->origin;
    o[ps->n] = strdup(origin);
    if (!o[ps->n] || json_array_append(ps->pods, pod) != 0) {
        free(o[ps->n]);
        return AS_ENOMEM;
    }
    ps->n++;
    return AS_OK;
}

/*
 * load_pods reads the -f file: every YAML document is a Pod (kind Pod or no
 * kind), a List/PodList of Pods, or empty. Errors print file and field.
 */
static int load_pods(const char *path, pod_src *ps)
{
    as_diag d = {{0}, {0}};
    json_t *docs = NULL;
    as_err err = doc_load_file(path, PLACE_MAX_PODS_FILE, true, &docs, &d);
    if (err) {
        fprintf(stderr, "agentsched place: %s\n", d.msg[0] ? d.msg : as_strerror(err));
        return 1;
    }
    int rc = 1;
    ps->pods = json_array();
    if (!ps->pods)
        goto oom;
    size_t ndocs = json_array_size(docs);
    char origin[96];
    for (size_t di = 0; di < ndocs; di++) {
        const json_t *doc = json_array_get(docs, di);
        char docname[48] = "";
        if (ndocs > 1)
            snprintf(docname, sizeof docname, "document %zu", di + 1);
        if (json_is_null(doc))
            continue;
        if (!json_is_object(doc)) {
            fprintf(stderr, "agentsched place: %s: %s%sexpected a Pod or a List of Pods\n", path,
                    docname, docname[0] ? ": " : "");
            goto done;
        }
        const json_t *items = json_object_get(doc, "items");
        if (is_kind(doc, "List") || is_kind(doc, "PodList") ||
            (!json_object_get(doc, "kind") && json_is_array(items))) {
            if (!json_is_array(items)) {
                fprintf(stderr, "agentsched place: %s: %s%sitems: expected a list of Pods\n", path,
                        docname, docname[0] ? ", " : "");
                goto done;
            }
            size_t j;
            json_t *item;
            json_array_foreach(items, j, item)
            {
                snprintf(origin, sizeof origin, "%s%sitems[%zu]", docname, docname[0] ? ", " : "",
                         j);
                if (!json_is_object(item) ||
                    (json_object_get(item, "kind") && !is_kind(item, "Pod"))) {
                    const json_t *k = json_is_object(item) ? json_object_get(item, "kind") : NULL;
                    fprintf(stderr,
                            "agentsched place: %s: %s: kind %s is not a Pod; -f takes Pods only\n",
                            path, origin, json_is_string(k) ? json_string_value(k) : "(none)");
                    goto done;
                }
                if ((err = pod_src_add(ps, item, origin)))
                    goto add_failed;
            }
            continue;
        }
        if (json_object_get(doc, "kind") && !is_kind(doc, "Pod")) {
            const json_t *k = json_object_get(doc, "kind");
            fprintf(stderr,
                    "agentsched place: %s: %s%skind %s is not a Pod; -f takes a Pod, a List of "
                    "Pods, or several Pod documents\n",
                    path, docname, docname[0] ? ": " : "",
                    json_is_string(k) ? json_string_value(k) : "(not a string)");
            goto done;
        }
        if ((err = pod_src_add(ps, (json_t *)doc, docname)))
            goto add_failed;
    }
    if (ps->n == 0) {
        fprintf(stderr, "agentsched place: %s: no pods in the file\n", path);
        goto done;
    }
    rc = 0;
    goto done;
add_failed:
    if (err == AS_ETOOBIG) {
        fprintf(stderr,
                "agentsched place: %s: more than %d pods; a dry run takes at most %d, split "
                "the file\n",
                path, PLACEMENT_MAX_PODS, PLACEMENT_MAX_PODS);
        goto done;
    }
oom:
    fprintf(stderr, "agentsched place: out of memory reading %s\n", path);
done:
    json_decref(docs);
    return rc;
}

/* print_pod_error names the file, the pod's place in it and the field. */
static void print_pod_error(const char *path, const pod_src *ps, size_t i, const as_diag *d)
{
    const char *o = ps->origin[i];
    /* Decoder messages usually repeat the field; print it only if not. */
    const char *f = d->field[0] && !strstr(d->msg, d->field) ? d->field : "";
    size_t ol = strlen(o);
    const char *join = !o[0] || !f[0] ? "" : o[ol - 1] == ']' ? "." : ", ";
    fprintf(stderr, "agentsched place: %s: %s%s%s%s%s\n", path, o, join, f,
            o[0] || f[0] ? ": " : "", d->msg);
}

/*
 * validate_pods decodes every pod against reg so that errors name the file
 * before any evaluation. With out non-NULL the decoded pods are kept.
 */
static int validate_pods(const char *path, const pod_src *ps, const model_registry *reg,
                         model_pod ***out)
{
    model_pod **pods = calloc(ps->n, sizeof *pods);
    if (!pods) {
        fprintf(stderr, "agentsched place: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < ps->n; i++) {
        as_diag d = {{0}, {0}};
        as_err err = model_pod_from_json(reg, json_array_get(ps->pods, i), &pods[i], &d);
        if (err) {
            if (!d.msg[0])
                snprintf(d.msg, sizeof d.msg, "%s", as_strerror(err));
            print_pod_error(path, ps, i, &d);
            placement_pods_free(pods, i);
            return 1;
        }
    }
    if (out)
        *out = pods;
    else
        placement_pods_free(pods, ps->n);
    return 0;
}

static int print_response(const json_t *resp, bool json)
{
    if (json) {
        if (json_dumpf(resp, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) != 0)
            return 1;
        fputc('\n', stdout);
        return 0;
    }
    if (placement_print_table(resp, stdout) != AS_OK) {
        fprintf(stderr, "agentsched place: the answer does not have the placement shape\n");
        return 1;
    }
    return 0;
}

static int parse_and_print(const char *data, size_t len, bool json)
{
    json_error_t je;
    json_t *resp = json_loadb(data, len, 0, &je);
    if (!resp) {
        fprintf(stderr, "agentsched place: malformed answer: %s\n", je.text);
        return 1;
    }
    int rc = print_response(resp, json);
    json_decref(resp);
    return rc;
}

static int run_offline(const place_opts *o, const pod_src *ps)
{
    int rc = 1;
    core *c = NULL;
    model_pod **pods = NULL;
    score_policy *policy = NULL;
    buf out;
    buf_init(&out, PLACE_MAX_RESPONSE);
    core_config cfg;
    core_config_defaults(&cfg);
    cfg.policy_path = o->policy;
    as_diag d = {{0}, {0}};
    as_err err = core_new(&cfg, &c, &d);
    if (!err)
        err = core_load_cluster(c, o->cluster, &d);
    if (err) {
        fprintf(stderr, "agentsched place: %s%s%s\n", d.field[0] ? d.field : "",
                d.field[0] ? ": " : "", d.msg[0] ? d.msg : as_strerror(err));
        goto done;
    }
    if (validate_pods(o->pods_path, ps, &c->reg, &pods))
        goto done;
    uint32_t k = o->candidates ? (uint32_t)o->candidates : PLACEMENT_DEFAULT_K;
    policy = core_policy_get(c);
    err = placement_run(c->cache, policy, (const model_pod *const *)pods, ps->n, k, &out);
    if (err) {
        fprintf(stderr, "agentsched place: evaluation failed: %s\n", as_strerror(err));
        goto done;
    }
    rc = parse_and_print(out.data, out.len, o->json);
done:
    if (policy)
        score_policy_unref(policy);
    if (pods)
        placement_pods_free(pods, ps->n);
    buf_free(&out);
    core_free(c);
    return rc;
}

static size_t curl_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
    buf *b = arg;
    size_t n = size * nmemb;
    return buf_append(b, ptr, n) == AS_OK ? n : 0;
}

/* server_error explains a non-200 answer, mapping "pods[i]" back to the
 * pod's place in the -f file. */
static void server_error(const place_opts *o, const pod_src *ps, long code, const buf *body)
{
    json_error_t je;
    json_t *e = body->len ? json_loadb(body->data, body->len, 0, &je) : NULL;
    const json_t *msg = json_object_get(e, "error");
    const json_t *field = json_object_get(e, "field");
    if (!json_is_string(msg)) {
        fprintf(stderr, "agentsched place: %s answered HTTP %ld%s%.*s\n", o->server, code,
                body->len ? ": " : "", (int)(body->len > 500 ? 500 : body->len),
                body->len ? body->data : "");
        json_decref(e);
        return;
    }
    const char *f = json_is_string(field) ? json_string_value(field) : "";
    size_t idx;
    int used = 0;
    if (sscanf(f, "pods[%zu]%n", &idx, &used) == 1 && used > 0 && idx < ps->n) {
        const char *rest = f + used;
        if (*rest == '.')
            rest++;
        as_diag d = {{0}, {0}};
        snprintf(d.field, sizeof d.field, "%s", rest);
        snprintf(d.msg, sizeof d.msg, "%s (server answered HTTP %ld)", json_string_value(msg),
                 code);
        print_pod_error(o->pods_path, ps, idx, &d);
    } else {
        fprintf(stderr, "agentsched place: %s answered HTTP %ld: %s%s%s\n", o->server, code, f,
                f[0] ? ": " : "", json_string_value(msg));
        if (strcmp(f, "client-certificate") == 0)
            fprintf(stderr, "agentsched place: %s\n",
                    o->cert ? "--cert was presented and refused: give one the server's "
                              "--tls-client-ca issued, allowed for TLS client use"
                            : "the server requires a client certificate: give --cert FILE "
                              "--key FILE");
    }
    json_decref(e);
}

/* curl_hint is what to try after a failed transfer, or "". */
static const char *curl_hint(const place_opts *o, CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
        return " (is `agentsched serve` running there?)";
    case CURLE_PEER_FAILED_VERIFICATION:
        return o->cacert ? " (is the server's certificate issued by a CA of --cacert, for the "
                           "host name of the URL?)"
                         : " (give the CA that issued the server's certificate with --cacert)";
    case CURLE_SSL_CACERT_BADFILE:
        return " (check the --cacert file: PEM certificates)";
    case CURLE_SSL_CERTPROBLEM:
        return " (check --cert and --key: a PEM certificate and its private key)";
    default:
        return "";
    }
}

static int run_server(const place_opts *o, const pod_src *ps)
{
    int rc = 1;
    model_registry reg;
    model_registry_init(&reg);
    char *body = NULL;
    char *url = NULL;
    CURL *h = NULL;
    struct curl_slist *hdrs = NULL;
    bool curl_inited = false;
    json_t *req = NULL;
    buf resp;
    buf_init(&resp, PLACE_MAX_RESPONSE);

    /* Syntax is checked locally so errors name the file; resources the
     * server's nodes have are its business. */
    if (validate_pods(o->pods_path, ps, &reg, NULL))
        goto done;
    req = json_pack("{s:O}", "pods", ps->pods);
    if (!req ||
        (o->candidates && json_object_set_new(req, "candidates", json_integer(o->candidates)) != 0))
        goto oom;
    body = json_dumps(req, JSON_COMPACT);
    if (!body)
        goto oom;

    size_t ulen = strlen(o->server);
    while (ulen > 0 && o->server[ulen - 1] == '/')
        ulen--;
    const char *suffix = PLACEMENT_PATH;
    size_t slen = strlen(suffix);
    if (ulen >= slen && memcmp(o->server + ulen - slen, suffix, slen) == 0)
        suffix = "";
    if (asprintf(&url, "%.*s%s", (int)ulen, o->server, suffix) < 0) {
        url = NULL;
        goto oom;
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        goto oom;
    curl_inited = true;
    if (!(h = curl_easy_init()))
        goto oom;
    hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (!hdrs)
        goto oom;
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, curl_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, o->timeout_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (o->cacert)
        curl_easy_setopt(h, CURLOPT_CAINFO, o->cacert);
    if (o->cert) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, o->cert);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(h, CURLOPT_SSLKEY, o->key);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        if (cc == CURLE_WRITE_ERROR && resp.err == AS_ETOOBIG)
            fprintf(stderr, "agentsched place: the answer of %s exceeds %zu bytes\n", url,
                    (size_t)PLACE_MAX_RESPONSE);
        else
            fprintf(stderr, "agentsched place: cannot reach agentsched at %s: %s%s\n", url,
                    errbuf[0] ? errbuf : curl_easy_strerror(cc), curl_hint(o, cc));
        goto done;
    }
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) {
        server_error(o, ps, code, &resp);
        goto done;
    }
    rc = parse_and_print(resp.data ? resp.data : "", resp.len, o->json);
    goto done;
oom:
    fprintf(stderr, "agentsched place: out of memory\n");
done:
    curl_slist_free_all(hdrs);
    if (h)
        curl_easy_cleanup(h);
    if (curl_inited)
        curl_global_cleanup();
    free(url);
    free(body);
    json_decref(req);
    buf_free(&resp);
    model_registry_destroy(&reg);
    return rc;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* readable: 0 if path opens for reading, else an error naming flag. */
static int readable(const char *flag, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "agentsched place: %s %s: %s\n", flag, path, strerror(errno));
        return 1;
    }
    fclose(f);
    return 0;
}

/* check_tls_flags applies the rules of --cacert, --cert and --key: 0, 2 on a
 * usage error, 1 if a file cannot be read. */
static int check_tls_flags(const place_opts *o)
{
    if (!o->cacert && !o->cert && !o->key)
        return 0;
    const char *first = o->cacert ? "--cacert" : o->cert ? "--cert" : "--key";
    if (!o->server)
        return usage_error("%s applies to --server only: it secures the connection to a "
                           "running agentsched",
                           first);
    if (!o->cert != !o->key)
        return usage_error(o->cert ? "--cert needs --key: a client certificate is presented with "
                                     "its private key%s"
                                   : "--key needs --cert: give the client certificate of the "
                                     "key%s",
                           "");
    if (strncasecmp(o->server, "https://", 8) != 0)
        return usage_error("%s needs an https:// --server URL", first);
    if ((o->cacert && readable("--cacert", o->cacert)) ||
        (o->cert && readable("--cert", o->cert)) || (o->key && readable("--key", o->key)))
        return 1;
    return 0;
}

/* See place.h. */
int place_cli_main(int argc, char **argv)
{
    place_opts o = {.timeout_s = 30};
    cli_parser p;
    cli_parser_init(&p, &place_cli, argc, argv);
    const cli_flag *fl = NULL;
    const char *v = NULL;
    int r;
    while ((r = cli_step(&p, &fl, &v)) == CLI_FLAG) {
        switch (fl->id) {
        case PLACE_CLUSTER:
            o.cluster = v;
            break;
        case PLACE_SERVER:
            o.server = v;
            break;
        case PLACE_FILENAME:
            o.pods_path = v;
            break;
        case PLACE_CANDIDATES:
            if (parse_long(v, 1, PLACEMENT_MAX_K, &o.candidates))
                return usage_error("--candidates %s: give an integer from 1 to 16", v);
            break;
        case PLACE_POLICY:
            o.policy = v;
            break;
        case PLACE_OUTPUT:
            if (strcmp(v, "json") == 0)
                o.json = true;
            else if (strcmp(v, "table") == 0)
                o.json = false;
            else
                return usage_error("-o %s: the output format is table or json", v);
            break;
        case PLACE_TIMEOUT:
            if (parse_long(v, 1, 3600, &o.timeout_s))
                return usage_error("--timeout %s: give whole seconds from 1 to 3600", v);
            break;
        case PLACE_CACERT:
            o.cacert = v;
            break;
        case PLACE_CERT:
            o.cert = v;
            break;
        case PLACE_KEY:
            o.key = v;
            break;
        }
    }
    if (r != CLI_END)
        return r == CLI_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!o.cluster == !o.server)
        return usage_error("%sgive exactly one of --cluster FILE or --server URL", "");
    if (!o.pods_path)
        return usage_error("%sgive the pods to place with -f FILE", "");
    if (o.server && o.policy)
        return usage_error("%s--policy applies to --cluster only; a server scores with its own "
                           "policy",
                           "");
    int trc = check_tls_flags(&o);
    if (trc)
        return trc;

    pod_src ps = {0};
    int rc = load_pods(o.pods_path, &ps);
    if (rc == 0)
        rc = o.cluster ? run_offline(&o, &ps) : run_server(&o, &ps);
    pod_src_free(&ps);
    return rc;
}
