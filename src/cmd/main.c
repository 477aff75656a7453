/* main.c - the agentsched command line: a table of subcommands. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/core/cache.h"
#include "agentsched/base/cli.h"
#include "agentsched/base/http.h"
#include "agentsched/base/listen.h"
#include "agentsched/base/log.h"
#include "agentsched/model/quantity.h"
#include "agentsched/api/placement.h"
#include "agentsched/cmd/place.h"
#include "agentsched/cmd/replay.h"
#include "agentsched/shard/shard.h"
#include "agentsched/cmd/gpu_share_advertiser.h"
#include "agentsched/cmd/shard_controller.h"
#include "agentsched/serve/svc.h"
#include "agentsched/base/sync.h"

#include "agentsched_commit.h" /* generated at build time: AGENTSCHED_GIT_COMMIT */
#ifndef AGENTSCHED_BUILD_TYPE
#define AGENTSCHED_BUILD_TYPE "unknown"
#endif

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv); /* argv[0] is the command name */
} cli_command;

static int cmd_serve(int argc, char **argv);
static int cmd_version(int argc, char **argv);

/* Every subcommand, in help order. Add a command with one line here; the
 * help text is generated from this table. */
static const cli_command cli_commands[] = {
    {"serve", "run the scheduler service: HTTP endpoints over a cluster", cmd_serve},
    {"place", "dry run: show where pods would go (offline or against a server)", place_cli_main},
    {"replay", "compare placement policies on a GPU cluster trace (openb CSV)", replay_cli_main},
    {"shard-controller", "compute and write NodeShards (node partitions between schedulers)",
     shard_controller_cli_main},
    {"gpu-share-advertiser", "keep agentsched.io/gpu-milli on GPU nodes at devices x 1000",
     gpu_share_advertiser_cli_main},
    {"version", "print the version, commit and build type", cmd_version},
};
#define CLI_NCOMMANDS (sizeof cli_commands / sizeof cli_commands[0])

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

static void main_usage(FILE *f)
{
    fprintf(f,
            "agentsched %s - a Kubernetes scheduler for AI-agent pods\n\n"
            "Usage: agentsched COMMAND [FLAGS]\n\nCommands:\n",
            AGENTSCHED_VERSION);
    /* one column wide enough for the longest command name */
    int w = 0;
    for (size_t i = 0; i < CLI_NCOMMANDS; i++)
        if ((int)strlen(cli_commands[i].name) > w)
            w = (int)strlen(cli_commands[i].name);
    for (size_t i = 0; i < CLI_NCOMMANDS; i++)
        fprintf(f, "  %-*s  %s\n", w, cli_commands[i].name, cli_commands[i].summary);
    fprintf(f,
            "\nFlags:\n"
            "  %-*s  show this help\n"
            "  %-*s  same as 'agentsched version'\n",
            w, "-h, --help", w, "--version");
    fprintf(f, "\nRun 'agentsched COMMAND --help' for the flags of a command.\n");
}

enum { VERSION_HELP };

static const cli_flag version_flags[] = {
    {VERSION_HELP, "--help", 'h', NULL, "show this help"},
};

static const cli_spec version_cli = {
    .command = "version",
    .synopsis = "Usage: agentsched version\n\nPrints the version, git commit and build type.\n\n",
    .flags = version_flags,
    .nflags = sizeof version_flags / sizeof version_flags[0],
};

static int cmd_version(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, &version_cli, argc, argv);
    const cli_flag *fl = NULL;
    const char *value = NULL;
    int r;
    while ((r = cli_step(&p, &fl, &value)) == CLI_FLAG)
        ; /* --help is the only flag */
    if (r != CLI_END)
        return r == CLI_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    printf("agentsched %s (commit %s, build %s)\n", AGENTSCHED_VERSION, AGENTSCHED_GIT_COMMIT,
           AGENTSCHED_BUILD_TYPE);
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* serve                                                              */
/* ------------------------------------------------------------------ */

typedef enum serve_flag_id {
    F_CLUSTER,
    F_LISTEN,
    F_METRICS_LISTEN,
    F_POLICY,
    F_SCHEDULER_NAME,
    F_EXTENDER_NAMES,
    F_VOLCANO_NAMES,
    F_SHARD_MODE,
    F_SHARD_NAME,
    F_CANDIDATES,
    F_WORKERS,
    F_MAX_BODY,
    F_HTTP_THREADS,
    F_HTTP_TIMEOUT,
    F_PLACEMENT_QPS,
    F_LOG_LEVEL,
    F_TLS_CERT,
    F_TLS_KEY,
    F_TLS_CLIENT_CA,
    F_TLS_CLIENT_AUTH_EXEMPT,
    F_METRICS_AUTH,
    F_KUBECONFIG,
    F_IN_CLUSTER,
    F_KUBE_API_QPS,
    F_KUBE_API_BURST,
    F_WATCH_TIMEOUT,
    F_WATCH_DOWN_LIMIT,
    F_EVENT_QPS,
    F_BIND_WARM,
    F_LEADER_ELECT,
    F_LEADER_ELECT_LEASE,
    F_LEADER_ELECT_IDENTITY,
    F_LEADER_ELECT_DURATION,
    F_CHECK,
    F_HELP,
} serve_flag_id;

static const cli_flag serve_flags[] = {
    {F_CLUSTER, "--cluster", 0, "FILE",
     "Kubernetes List (YAML or JSON) of Nodes and Pods to schedule against,\n"
     "e.g. `kubectl get nodes,pods -A -o yaml` (embedded mode)"},
    {F_LISTEN, "--listen", 0, "HOST:PORT",
     "address of the HTTP endpoints (default 127.0.0.1:8888; port 0 picks\n"
     "a free port, logged at start-up)"},
    {F_METRICS_LISTEN, "--metrics-listen", 0, "HOST:PORT",
     "also serve GET /healthz, /readyz and /metrics, and nothing else, on\n"
     "this address (plain HTTP, no client certificate): for the kubelet's\n"
     "probes and Prometheus where --listen is loopback (default: none)"},
    {F_POLICY, "--policy", 0, "FILE", "scoring policy YAML (default: built-in); SIGHUP reloads it"},
    {F_SCHEDULER_NAME, "--scheduler-name", 0, "NAME",
     "schedulerName this instance serves (default agent-scheduler)"},
    {F_EXTENDER_NAMES, "--extender-scheduler-names", 0, "NAME[,NAME...]",
     "schedulerNames of the pods the extender's bind verb may bind\n"
     "(default: --scheduler-name); others are refused with 403"},
    {F_VOLCANO_NAMES, "--volcano-scheduler-names", 0, "NAME[,NAME...]",
     "schedulerNames of the pods Volcano's allocateFunc/deallocateFunc\n"
     "may act on (default volcano)"},
    {F_SHARD_MODE, "--shard-mode", 0, "MODE",
     "none | soft (prefer in-shard nodes) | hard (only in-shard nodes);\n"
     "default none"},
    {F_SHARD_NAME, "--shard-name", 0, "NAME",
     "NodeShard to use (default agentsched, distinct from\n"
     "vc-agent-scheduler's default agent-scheduler)"},
    {F_CANDIDATES, "--candidates", 0, "K",
     "candidates per decision, 1..16 (default 3; placement reports them)"},
    {F_WORKERS, "--workers", 0, "N",
     "live mode: fast-path worker threads scheduling pods of\n"
     "--scheduler-name, 0..256 (default 2; 0 = no fast path: extender and\n"
     "dry runs only; the fast path runs only with\n"
     "--kubeconfig / --in-cluster, not with --cluster)"},
    {F_MAX_BODY, "--max-body", 0, "BYTES",
     "request body cap; a quantity like 16Mi or 1048576, 1Ki..1Gi\n"
     "(default 16Mi); larger bodies get 413"},
    {F_HTTP_THREADS, "--http-threads", 0, "N",
     "HTTP worker threads, 1..256 (default: the CPUs this process may\n"
     "use: its affinity mask, lowered to its cgroup's\n"
     "CPU quota); in live mode extender binds wait for\n"
     "the API server on 64 separate threads, never on these"},
    {F_HTTP_TIMEOUT, "--http-timeout", 0, "SECONDS",
     "close a connection idle this long, 1..3600 (default 120); a\n"
     "request body must arrive within twice this from its headers"},
    {F_PLACEMENT_QPS, "--placement-qps", 0, "N",
     "dry runs (POST /v1/placements) a second per caller address,\n"
     "0..100000, burst 2N; more get 429 (default 50; 0: no limit)"},
    {F_LOG_LEVEL, "--log-level", 0, "LEVEL", "error | warn | info | debug (default info)"},
    {F_TLS_CERT, "--tls-cert", 0, "FILE",
     "serve HTTPS with this PEM certificate (chain, leaf first);\n"
     "needs --tls-key; re-read on SIGHUP and when it changes"},
    {F_TLS_KEY, "--tls-key", 0, "FILE", "the PEM private key of --tls-cert (unencrypted)"},
    {F_TLS_CLIENT_CA, "--tls-client-ca", 0, "FILE",
     "require a client certificate issued by a CA of this PEM file\n"
     "on every endpoint but /healthz, /readyz and /metrics (401\n"
     "without one, 403 when it does not verify); needs --tls-cert;\n"
     "re-read on SIGHUP and when it changes"},
    {F_TLS_CLIENT_AUTH_EXEMPT, "--tls-client-auth-exempt", 0, "PREFIX[,...]",
     "with --tls-client-ca: also serve these path prefixes without a\n"
     "client certificate (e.g. /volcano/ for Volcano's extender\n"
     "plugin, which cannot present one: protect it by network\n"
     "placement instead)"},
    {F_METRICS_AUTH, "--metrics-auth", 0, NULL,
     "with --tls-client-ca: /metrics needs a client certificate too"},
    {F_KUBECONFIG, "--kubeconfig", 0, "FILE",
     "live mode: follow the cluster of this kubeconfig (current-context)\n"
     "and bind through its API server (instead of --cluster)"},
    {F_IN_CLUSTER, "--in-cluster", 0, NULL,
     "live mode from the pod's service account (KUBERNETES_SERVICE_HOST)"},
    {F_KUBE_API_QPS, "--kube-api-qps", 0, "N", "API requests per second, 1..100000 (default 1000)"},
    {F_KUBE_API_BURST, "--kube-api-burst", 0, "N", "API request burst, 1..100000 (default 2000)"},
    {F_WATCH_TIMEOUT, "--watch-timeout", 0, "SECONDS",
     "reconnect a watch silent this long, bookmarks included,\n"
     "1..86400 (default 120)"},
    {F_WATCH_DOWN_LIMIT, "--watch-down-limit", 0, "SECONDS",
     "/readyz fails once the watches are down this long, 1..86400\n"
     "(default 60)"},
    {F_EVENT_QPS, "--event-qps", 0, "N",
     "live mode: at most N Events a second (Scheduled,\n"
     "FailedScheduling), 0..100000; the rest are dropped\n"
     "and counted (default 0: no limit)"},
    {F_BIND_WARM, "--bind-warm", 0, "N",
     "live mode: while leading, keep N of the 96 bind\n"
     "connections open ahead of use (a GET on one idle for\n"
     "45 s), so that a burst of bindings starts without TLS\n"
     "handshakes, 0..96 (0: open them as bindings need them,\n"
     "the default with --workers 0; else default 96)"},
    {F_LEADER_ELECT, "--leader-elect", 0, NULL,
     "live mode: run the fast path only while holding a Lease\n"
     "(coordination.k8s.io/v1), so that replicas never\n"
     "schedule at once; a standby keeps its cache and queue\n"
     "current and serves HTTP (extender, dry runs) meanwhile"},
    {F_LEADER_ELECT_LEASE, "--leader-elect-lease", 0, "NS/NAME",
     "the Lease (default kube-system/agentsched-SCHEDULER_NAME)"},
    {F_LEADER_ELECT_IDENTITY, "--leader-elect-identity", 0, "ID",
     "holder identity (default $POD_NAME, else HOSTNAME-PID)"},
    {F_LEADER_ELECT_DURATION, "--leader-elect-lease-duration", 0, "SECONDS",
     "2..3600 (default 15); the leader stops scheduling when it\n"
     "could not renew for 2/3 of it, a standby takes over\n"
     "once the Lease went unrenewed for all of it"},
    {F_CHECK, "--check", 0, NULL,
     "check the command line (flags, values, how they combine) and exit 0\n"
     "if it is valid, without reading any file or serving:\n"
     "for manifests in CI"},
    {F_HELP, "--help", 'h', NULL, "show this help"},
};
#define SERVE_NFLAGS (sizeof serve_flags / sizeof serve_flags[0])

static const cli_spec serve_cli = {
    .command = "serve",
    .synopsis = "Usage: agentsched serve (--cluster FILE | --kubeconfig FILE | --in-cluster)\n"
                "       [FLAGS]\n\n"
                "Loads the cluster into the node cache and serves the HTTP endpoints\n"
                "(GET /healthz /readyz /version /metrics, POST /v1/placements, ...).\n"
                "SIGINT/SIGTERM stop it cleanly; SIGHUP reloads the --policy file and the\n"
                "TLS files.\n\n",
    .flags = serve_flags,
    .nflags = SERVE_NFLAGS,
};

static int flag_error(const char *flag, const char *fmt, const char *value)
{
    fprintf(stderr, "agentsched serve: %s: ", flag);
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\n");
    return CLI_EXIT_USAGE;
}

/* exempt_list_ok: every element of a comma-separated list is a path
 * prefix starting with '/'. */
static bool exempt_list_ok(const char *v)
{
    for (const char *p = v;; p++) {
        if (*p != '/')
            return false;
        p = strchr(p, ',');
        if (!p)
            return true;
    }
}

static int parse_uint(const char *flag, const char *v, unsigned long lo, unsigned long hi,
                      unsigned long *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (!*v || *v == '-' || errno || *end || n < lo || n > hi) {
        fprintf(stderr, "agentsched serve: %s: '%s' is not a whole number in %lu..%lu\n", flag, v,
                lo, hi);
        return CLI_EXIT_USAGE;
    }
    *out = n;
    return CLI_EXIT_OK;
}

/* How a whole-number flag's value lands in svc_config. */
typedef enum { SERVE_UNSIGNED, SERVE_DOUBLE, SERVE_SECONDS_MS } serve_store;

/* The whole-number flags of serve: their range and where they go. */
static const struct serve_number {
    int id;
    unsigned long lo, hi;
    size_t offset;
    serve_store store;
} serve_numbers[] = {
    {F_CANDIDATES, 1, PLACEMENT_MAX_K, offsetof(svc_config, candidates), SERVE_UNSIGNED},
    {F_WORKERS, 0, 256, offsetof(svc_config, workers), SERVE_UNSIGNED},
    {F_HTTP_THREADS, 1, HTTP_MAX_THREADS, offsetof(svc_config, http_threads), SERVE_UNSIGNED},
    {F_HTTP_TIMEOUT, 1, 3600, offsetof(svc_config, http_timeout_s), SERVE_UNSIGNED},
    {F_PLACEMENT_QPS, 0, 100000, offsetof(svc_config, placement_qps), SERVE_UNSIGNED},
    {F_LEADER_ELECT_DURATION, 2, 3600, offsetof(svc_config, lease_duration_ms), SERVE_SECONDS_MS},
    {F_KUBE_API_QPS, 1, 100000, offsetof(svc_config, kube_api_qps), SERVE_DOUBLE},
    {F_KUBE_API_BURST, 1, 100000, offsetof(svc_config, kube_api_burst), SERVE_UNSIGNED},
    {F_WATCH_TIMEOUT, 1, 86400, offsetof(svc_config, watch_timeout_ms), SERVE_SECONDS_MS},
    {F_WATCH_DOWN_LIMIT, 1, 86400, offsetof(svc_config, watch_down_ms), SERVE_SECONDS_MS},
    {F_EVENT_QPS, 0, 100000, offsetof(svc_config, event_qps), SERVE_DOUBLE},
    {F_BIND_WARM, 0, K8S_BIND_CONCURRENCY, offsetof(svc_config, bind_warm), SERVE_UNSIGNED},
};

/* If id is one of serve_numbers, parses value into cfg and sets *handled.
 * Returns CLI_EXIT_OK, or CLI_EXIT_USAGE after saying what is wrong. */
static int serve_number_set(svc_config *cfg, const cli_flag *fl, const char *value, bool *handled)
{
    *handled = false;
    for (size_t i = 0; i < sizeof serve_numbers / sizeof serve_numbers[0]; i++) {
        const struct serve_number *sn = &serve_numbers[i];
        if (sn->id != fl->id)
            continue;
        unsigned long n = 0;
        *handled = true;
        if (parse_uint(fl->name, value, sn->lo, sn->hi, &n))
            return CLI_EXIT_USAGE;
        char *field = (char *)cfg + sn->offset;
        switch (sn->store) {
        case SERVE_UNSIGNED:
            *(unsigned *)(void *)field = (unsigned)n;
            break;
        case SERVE_DOUBLE:
            *(double *)(void *)field = (double)n;
            break;
        case SERVE_SECONDS_MS:
            *(int64_t *)(void *)field = (int64_t)n * 1000;
            break;
        }
        return CLI_EXIT_OK;
    }
    return CLI_EXIT_OK;
}

/* A Kubernetes object name: a lower-case DNS subdomain (RFC 1123), or with
 * label a DNS label (namespaces), as the API server will insist. */
static int check_dns(const char *flag, const char *v, bool label)
{
    size_t n = strlen(v), max = label ? 63 : 253;
    bool ok = n > 0 && n <= max;
    for (size_t i = 0; ok && i < n; i++) {
        char c = v[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        ok = alnum || c == '-' || (!label && c == '.');
        if ((i == 0 || i == n - 1) && !alnum)
            ok = false;
    }
    if (!ok)
        return flag_error(flag,
                          label ? "namespace '%s' must be a DNS label: 1..63 of a-z, 0-9, '-', "
                                  "starting and ending with a letter or digit"
                                : "name '%s' must be a DNS subdomain: 1..253 of a-z, 0-9, '-', "
                                  "'.', starting and ending with a letter or digit",
                          v);
    return CLI_EXIT_OK;
}

static int check_listen(const char *flag, const char *v)
{
    const char *colon = strrchr(v, ':');
    if (!colon)
        return flag_error(flag, "'%s' needs a port: use HOST:PORT, e.g. 127.0.0.1:8888", v);
    unsigned long port;
    if (parse_uint(flag, colon + 1, 0, 65535, &port))
        return CLI_EXIT_USAGE;
    return CLI_EXIT_OK;
}

/* Parses serve's argv into cfg. Returns -1 to go on, else an exit status. */
static int serve_parse(int argc, char **argv, svc_config *cfg)
{
    bool check = false;
    cli_parser p;
    cli_parser_init(&p, &serve_cli, argc, argv);
    const cli_flag *fl = NULL;
    const char *value = NULL;
    int r;
    while ((r = cli_step(&p, &fl, &value)) == CLI_FLAG) {
        bool number = false;
        if (serve_number_set(cfg, fl, value, &number))
            return CLI_EXIT_USAGE;
        if (number)
            continue;
        switch (fl->id) {
        case F_CLUSTER:
            if (!*value)
                return flag_error(fl->name, "empty file name%s", "");
            cfg->cluster_path = value;
            break;
        case F_LISTEN:
            if (check_listen(fl->name, value))
                return CLI_EXIT_USAGE;
            cfg->listen = value;
            break;
        case F_METRICS_LISTEN:
            if (check_listen(fl->name, value))
                return CLI_EXIT_USAGE;
            cfg->metrics_listen = value;
            break;
        case F_POLICY:
            if (!*value)
                return flag_error(fl->name, "empty file name%s", "");
            cfg->policy_path = value;
            break;
        case F_SCHEDULER_NAME:
            /* spec.schedulerName is a DNS subdomain, and the default Lease
             * is named "agentsched-" + it, so 11 characters are kept. */
            if (check_dns(fl->name, value, false))
                return CLI_EXIT_USAGE;
            if (strlen(value) > 242)
                return flag_error(fl->name,
                                  "'%s' is longer than 242 characters (the default Lease "
                                  "adds 'agentsched-' to it, and object names stop at 253)",
                                  value);
            cfg->scheduler_name = value;
            break;
        case F_EXTENDER_NAMES:
        case F_VOLCANO_NAMES:
            if (!core_names_valid(value))
                return flag_error(fl->name,
                                  "'%s' is not NAME[,NAME...] (non-empty names, no spaces, "
                                  "under 1024 bytes)",
                                  value);
            if (fl->id == F_EXTENDER_NAMES)
                cfg->extender_scheduler_names = value;
            else
                cfg->volcano_scheduler_names = value;
            break;
        case F_SHARD_NAME: /* a NodeShard's name */
            if (check_dns(fl->name, value, false))
                return CLI_EXIT_USAGE;
            cfg->shard_name = value;
            break;
        case F_SHARD_MODE:
            if (cache_shard_mode_parse(value, &cfg->shard_mode) != AS_OK)
                return flag_error(fl->name, "'%s' is not one of none, soft, hard", value);
            break;
        case F_MAX_BODY: {
            int64_t bytes = 0;
            as_diag d = {0};
            if (model_quantity_parse(value, strlen(value), false, &bytes, &d) != AS_OK ||
                bytes < 1024 || bytes > ((int64_t)1 << 30))
                return flag_error(
                    fl->name, "'%s' is not a size between 1Ki and 1Gi (e.g. 16Mi, 1048576)", value);
            cfg->max_body = (size_t)bytes;
            break;
        }
        case F_LOG_LEVEL: {
            log_level lvl;
            if (!log_level_parse(value, &lvl))
                return flag_error(fl->name, "'%s' is not one of error, warn, info, debug", value);
            cfg->log_level = (int)lvl;
            break;
        }
        case F_TLS_CERT:
        case F_TLS_KEY:
            if (!*value)
                return flag_error(fl->name, "empty file name%s", "");
            if (fl->id == F_TLS_CERT)
                cfg->tls_cert_path = value;
            else
                cfg->tls_key_path = value;
            break;
        case F_TLS_CLIENT_CA:
            if (!*value)
                return flag_error(fl->name, "empty file name%s", "");
            cfg->tls_client_ca_path = value;
            break;
        case F_TLS_CLIENT_AUTH_EXEMPT:
            if (!exempt_list_ok(value))
                return flag_error(fl->name,
                                  "'%s' is not a comma-separated list of path prefixes, each "
                                  "starting with '/' (e.g. /volcano/)",
                                  value);
            cfg->tls_client_exempt = value;
            break;
        case F_METRICS_AUTH:
            cfg->metrics_auth = true;
            break;
        case F_KUBECONFIG:
            if (!*value)
                return flag_error(fl->name, "empty file name%s", "");
            cfg->kubeconfig = value;
            break;
        case F_IN_CLUSTER:
            cfg->in_cluster = true;
            break;
        case F_LEADER_ELECT:
            cfg->leader_elect = true;
            break;
        case F_CHECK:
            check = true;
            break;
        case F_LEADER_ELECT_LEASE: {
            const char *slash = strchr(value, '/');
            if (!slash || slash == value || !slash[1] || strchr(slash + 1, '/') ||
                (size_t)(slash - value) >= sizeof cfg->lease_namespace ||
                strlen(slash + 1) >= sizeof cfg->lease_name)
                return flag_error(
                    fl->name, "'%s' is not NAMESPACE/NAME (e.g. kube-system/agentsched)", value);
            snprintf(cfg->lease_namespace, sizeof cfg->lease_namespace, "%.*s",
                     (int)(slash - value), value);
            snprintf(cfg->lease_name, sizeof cfg->lease_name, "%s", slash + 1);
            if (check_dns(fl->name, cfg->lease_namespace, true) ||
                check_dns(fl->name, cfg->lease_name, false))
                return CLI_EXIT_USAGE;
            break;
        }
        case F_LEADER_ELECT_IDENTITY:
            if (!*value || strlen(value) > 255)
                return flag_error(fl->name, "'%s' must be 1..255 characters", value);
            cfg->lease_identity = value;
            break;
        }
    }
    if (r != CLI_END)
        return r == CLI_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    int sources = !!cfg->cluster_path + !!cfg->kubeconfig + !!cfg->in_cluster;
    if (sources > 1) {
        fprintf(stderr, "agentsched serve: give only one of --cluster, --kubeconfig, "
                        "--in-cluster\n");
        return CLI_EXIT_USAGE;
    }
    if (!cfg->tls_cert_path != !cfg->tls_key_path) {
        fprintf(stderr,
                "agentsched serve: %s needs %s: HTTPS takes the certificate and its "
                "private key\n",
                cfg->tls_cert_path ? "--tls-cert" : "--tls-key",
                cfg->tls_cert_path ? "--tls-key" : "--tls-cert");
        return CLI_EXIT_USAGE;
    }
    if ((cfg->tls_client_ca_path || cfg->tls_client_exempt || cfg->metrics_auth) &&
        !cfg->tls_cert_path) {
        fprintf(stderr, "agentsched serve: --tls-client-ca needs --tls-cert and --tls-key: "
                        "client certificates are asked for in the TLS handshake\n");
        return CLI_EXIT_USAGE;
    }
    if ((cfg->tls_client_exempt || cfg->metrics_auth) && !cfg->tls_client_ca_path) {
        fprintf(stderr, "agentsched serve: --tls-client-auth-exempt and --metrics-auth need "
                        "--tls-client-ca\n");
        return CLI_EXIT_USAGE;
    }
    if (cfg->metrics_auth && cfg->metrics_listen) {
        fprintf(stderr, "agentsched serve: --metrics-listen serves /metrics without a client "
                        "certificate, which --metrics-auth asks for: drop one of them\n");
        return CLI_EXIT_USAGE;
    }
    bool lease_flags = cfg->lease_name[0] || cfg->lease_identity || cfg->lease_duration_ms;
    if (lease_flags && !cfg->leader_elect) {
        fprintf(stderr, "agentsched serve: --leader-elect-lease, --leader-elect-identity and "
                        "--leader-elect-lease-duration need --leader-elect\n");
        return CLI_EXIT_USAGE;
    }
    if (cfg->leader_elect && cfg->cluster_path) {
        fprintf(stderr, "agentsched serve: --leader-elect needs a live cluster (--kubeconfig or "
                        "--in-cluster); with --cluster there is no fast path to elect\n");
        return CLI_EXIT_USAGE;
    }
    if (!sources) {
        fprintf(stderr, "agentsched serve: --cluster FILE is required (a Kubernetes List of "
                        "Nodes and Pods, e.g. deploy/examples/cluster.yaml), or --kubeconfig "
                        "FILE / --in-cluster for a live cluster\n"
                        "Run 'agentsched serve --help' for the list of flags.\n");
        return CLI_EXIT_USAGE;
    }
    if (check) {
        printf("agentsched serve: command line ok\n");
        return CLI_EXIT_OK;
    }
    return -1;
}

static void print_diag(const char *what, as_err err, const as_diag *d)
{
    fprintf(stderr, "agentsched serve: %s: %s", what, d->msg[0] ? d->msg : as_strerror(err));
    if (d->field[0])
        fprintf(stderr, " (field %s)", d->field);
    fprintf(stderr, "\n");
}

static int cmd_serve(int argc, char **argv)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    int rc = serve_parse(argc, argv, &cfg);
    if (rc >= 0)
        return rc;
    log_set_level((log_level)cfg.log_level);

    /* Signals are taken synchronously by this thread (sigtimedwait): blocked
     * before any other thread exists so every thread inherits the mask. */
    sigset_t sigs;
    sync_block_signals(&sigs);

    svc *s = NULL;
    as_diag d = {0};
    as_err err = svc_new(&cfg, &s, &d);
    if (err) {
        print_diag("cannot start", err, &d);
        return CLI_EXIT_FAIL;
    }
    const char *stage = NULL;
    if ((err = svc_start(s, &stage, &d))) {
        print_diag(stage, err, &d);
        svc_free(s);
        return CLI_EXIT_FAIL;
    }

    char host[256];
    listen_host(cfg.listen, host, sizeof host);
    cache_stats cs;
    cache_get_stats(s->core->cache, &cs);
    score_policy *pol = core_policy_get(s->core);
    /* the CPU budget the thread pools were sized by, so that a container
     * limit that was (or was not) seen shows in the first lines */
    sync_cpus cpus;
    sync_usable_cpus(NULL, &cpus);
    log_info("msg=\"agentsched serving\" version=%s listen=%s://%s:%u cluster=%s nodes=%zu "
             "pods_bound=%zu load_ms=%.1f policy=%s shard_mode=%s scheduler_name=%s "
             "http_threads=%u cpus_affinity=%u cpu_quota=%.2f",
             AGENTSCHED_VERSION, cfg.tls_cert_path ? "https" : "http", host,
             (unsigned)http_server_port(s->http),
             cfg.cluster_path ? cfg.cluster_path
             : cfg.kubeconfig ? cfg.kubeconfig
                              : "-",
             cs.nodes, cs.pods_bound, s->load_ms, score_strategy_name(score_policy_strategy(pol)),
             cache_shard_mode_name(cfg.shard_mode), s->cfg.scheduler_name,
             http_server_threads(s->http), cpus.affinity, cpus.quota);
    score_policy_unref(pol);
    if (s->http_metrics) {
        listen_host(cfg.metrics_listen, host, sizeof host);
        log_info("msg=\"probes and metrics served\" address=http://%s:%u paths=/healthz,/readyz,"
                 "/metrics",
                 host, (unsigned)http_server_port(s->http_metrics));
    }

    for (;;) {
        struct timespec tick = {.tv_sec = 1};
        int sig = sigtimedwait(&sigs, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) {
            log_info("msg=\"shutting down\" signal=%s", sig == SIGINT ? "SIGINT" : "SIGTERM");
            break;
        }
        as_diag td = {0};
        bool tls_reloaded = false;
        as_err terr = svc_reload_tls(s, sig == SIGHUP, &tls_reloaded, &td);
        if (tls_reloaded)
            log_info("msg=\"TLS certificate, key and client CA reloaded\" cert=%s client_ca=%s",
                     s->cfg.tls_cert_path,
                     s->cfg.tls_client_ca_path ? s->cfg.tls_client_ca_path : "-");
        else if (terr)
            log_error("msg=\"TLS reload failed; new connections keep the current certificate "
                      "and client CA\" error=\"%s\" field=%s",
                      td.msg[0] ? td.msg : as_strerror(terr), td.field[0] ? td.field : "-");
        if (sig == SIGHUP) {
            as_diag hd = {0};
            as_err herr = svc_reload_policy(s, &hd);
            if (herr == AS_OK)
                log_info("msg=\"policy reloaded\" file=%s", s->cfg.policy_path);
            else
                log_error("msg=\"policy reload failed; keeping the current policy\" error=\"%s\" "
                          "field=%s",
                          hd.msg[0] ? hd.msg : as_strerror(herr), hd.field[0] ? hd.field : "-");
        }
        if (s->stop)
            break;
    }
    svc_free(s); /* stops in the reverse order of svc_start */
    log_info("msg=\"stopped\"");
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    if (argc < 2) {
        main_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        main_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0)
        return cmd_version(1, argv + 1);
    for (size_t i = 0; i < CLI_NCOMMANDS; i++)
        if (strcmp(cmd, cli_commands[i].name) == 0)
            return cli_commands[i].fn(argc - 1, argv + 1);
    const char *best = NULL;
    size_t bestd = 3;
    for (size_t i = 0; i < CLI_NCOMMANDS; i++) {
        size_t d = cli_distance(cmd, cli_commands[i].name);
        if (d < bestd) {
            bestd = d;
            best = cli_commands[i].name;
        }
    }
    fprintf(stderr, "agentsched: unknown command '%s'", cmd);
    if (best)
        fprintf(stderr, "; did you mean '%s'?", best);
    fprintf(stderr, "\nRun 'agentsched --help' for the list of commands.\n");
    return CLI_EXIT_USAGE;
}
