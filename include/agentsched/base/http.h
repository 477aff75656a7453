/*
 * http.h - the HTTP server (libmicrohttpd) and its route table.
 *
 * A static table of {method, path, handler} routes; the server owns one
 * thread pool (sized to the cores, epoll), caps request bodies (413 beyond
 * the cap), answers 404 for unknown paths and 405 (with Allow) for a known
 * path with the wrong method. Each request gets a pool freed when the
 * response is queued. Handlers run on the pool threads concurrently;
 * handlers of routes marked blocking run on separate offload threads while
 * their connection is suspended (MHD suspend/resume), so a slow API round
 * trip never holds a pool thread and the connections it serves.
 * Over HTTPS the serving credentials are handed to each handshake (so they
 * can be replaced while connections stay open) and, with a client CA,
 * every route not marked anonymous needs a verified client certificate.
 */
#ifndef AGENTSCHED_HTTP_H
#define AGENTSCHED_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/error.h"
#include "agentsched/base/pool.h"

typedef struct http_request {
    const char *method;
    const char *path; /* without query string */
    const char *body; /* NUL-terminated copy; "" when none */
    size_t body_len;
    pool *pool; /* per-request scratch, freed after the response */
    void *conn; /* opaque (MHD connection) for http_request_query */
    /* Who is calling: the subject CN of the verified client certificate
     * when the server checks them (http_server_config.tls_client_ca_pem),
     * else "-" (no client authentication, an anonymous route, or a
     * certificate without a CN). Never NULL. */
    const char *caller;
    /* The caller's address, "IP:PORT" ("[IPv6]:PORT"); "" when unknown
     * (a handler called directly). For log lines that name who asked. */
    const char *remote;
    /* The same address without the port ("127.0.0.1"): the key of per-caller
     * limits, where every connection of one client must count together. */
    char peer[64];
    void *server, *state; /* for http_request_charge_dom; NULL: called directly */
} http_request;

typedef struct http_response {
    int status;               /* default 200 */
    const char *content_type; /* default "application/json" (static string) */
    buf body;
    unsigned retry_after_s; /* > 0: sent as a Retry-After header */
} http_response;

typedef void (*http_handler_fn)(void *ctx, const http_request *req, http_response *resp);

typedef struct http_route {
    const char *method; /* "GET", "POST" */
    const char *path;   /* exact match */
    http_handler_fn fn;
    /* The handler may block on another service (an API-server round trip):
     * when the server has offload threads it runs there, its connection
     * suspended meanwhile, so the pool threads keep serving every other
     * connection. Without offload threads it runs inline like the rest. */
    bool blocking;
    /* The handler's context; NULL = the server's (http_server_config.ctx).
     * Lets every entry point's routes run with its own state. */
    void *ctx;
    /* Served without a verified client certificate even when the server
     * requires them (probes, an unauthenticated /metrics). The zero value
     * requires one, so a route nobody thought about is protected. */
    bool anonymous;
    /* The handler scans its body without a DOM: charged its bytes only;
     * it calls http_request_charge_dom before building a DOM of it. */
    bool scans;
} http_route;

typedef struct http_server_config {
    const char *listen; /* "HOST:PORT"; port 0 picks a free one */
    unsigned threads;   /* 0 = sync_usable_cpus; at most HTTP_MAX_THREADS */
    size_t max_body;    /* bytes; 0 = 16 MiB */
    /* Request memory held at once across all connections (0 = 512 MiB;
     * never below max_body): each body as it arrives, then, before its
     * handler runs, its bytes plus 256 a JSON value (what decoding it
     * costs). A request that does not fit gets 503 with Retry-After (413
     * when it alone is over); a chunked one that outgrows it is closed. */
    size_t body_budget;
    const http_route *routes; /* borrowed, must outlive the server */
    size_t nroutes;
    void *ctx; /* passed to every handler whose route has no ctx of its own */
    /* Connection bounds; zero takes the default. */
    unsigned conn_limit; /* max concurrent connections; 0 = 1024 */
    unsigned timeout_s;  /* idle connection timeout; 0 = 120 s. A request's body
                          * must also arrive within 2 x timeout_s of its
                          * headers (a byte a second resets the idle timer),
                          * else its connection is closed. */
    /* observe, when set, is called once per answered request (any status,
     * including 401/403/404/405/413) with the caller (http_request.caller)
     * and the elapsed time, from a pool thread. */
    void (*observe)(void *ctx, const char *method, const char *path, const char *caller, int status,
                    uint64_t elapsed_ns);
    /* Threads running the handlers of blocking routes (0 = run them inline
     * on the pool threads) and the cap on requests waiting for one of them
     * (0 = 4096); past the cap a blocking route answers 503 at once. */
    unsigned offload_threads;
    size_t offload_queue;
    /* HTTPS: a PEM certificate (chain, leaf first) and its PEM private
     * key, both or neither (NULL = plain HTTP). Borrowed: the server copies
     * them. */
    const char *tls_cert_pem;
    const char *tls_key_pem;
    /* Client authentication (needs the two above): PEM CA certificates;
     * the handshake asks every client for a certificate, and each request
     * to a route that is not anonymous must carry one that chains to one of
     * them and allows TLS client use (401 without one, 403 when it does not
     * verify). NULL = no client authentication. Borrowed. */
    const char *tls_client_ca_pem;
    /* Comma-separated path prefixes served as anonymous routes when client
     * authentication is on (callers that cannot present a certificate and
     * are protected otherwise). NULL or "" = none. Borrowed. */
    const char *tls_client_exempt;
} http_server_config;

typedef struct http_server http_server;

/* The most pool threads a server runs (a larger cfg.threads is refused). */
#define HTTP_MAX_THREADS 256

/* http_server_start binds and starts serving (HTTPS when cfg has a TLS
 * certificate and key). AS_EINVAL (bad listen address, more than
 * HTTP_MAX_THREADS threads, a certificate without a key or the reverse,
 * or either refused by GnuTLS: diag's field says which), AS_EIO (bind
 * failed: port in use). */
as_err http_server_start(const http_server_config *cfg, http_server **out, as_diag *diag);

/* http_server_set_tls replaces the serving certificate and key, and the
 * client CA when the server authenticates clients, for the handshakes and
 * requests that follow: connections already open keep the certificate
 * they were handshaken with and are not dropped; every request is then
 * checked against the new CA. client_ca_pem must be given exactly when the
 * server was started with one (switching client authentication on or off
 * needs a restart). All-or-nothing: on error the old credentials stay.
 * AS_EINVAL (not an HTTPS server, a PEM refused, a key that does not match
 * the certificate, a CA file without certificates: diag's field is
 * "tls-cert", "tls-key" or "tls-client-ca"), AS_ENOMEM. */
as_err http_server_set_tls(http_server *s, const char *cert_pem, const char *key_pem,
                           const char *client_ca_pem, as_diag *diag);

/* http_server_stop stops accepting, waits for in-flight requests, frees. */
void http_server_stop(http_server *s);

/* http_server_port returns the bound TCP port. */
uint16_t http_server_port(const http_server *s);

/* http_server_threads returns how many pool threads s runs (what
 * cfg.threads = 0 chose, for the start-up log); 0 for NULL. */
unsigned http_server_threads(const http_server *s);

/* http_request_charge_dom charges req's body as a route without `scans`
 * is charged (bytes + 256 a JSON value). AS_OK (also without a server),
 * else AS_ELIMIT with resp answered 413 (alone too large) or 503. */
as_err http_request_charge_dom(const http_request *req, http_response *resp);

/* http_request_query returns the value of a query argument or NULL. */
const char *http_request_query(const http_request *req, const char *key);

/* http_stalled is for liveness endpoints: when the heartbeat last_ms (a
 * clock_mono_ms time; 0 = not started yet, never stalled) is more than
 * limit_ms old it answers 503 with a text body "stalled: WHAT has shown no
 * sign of life for N s" and returns true; else false, resp untouched. */
bool http_stalled(http_response *resp, int64_t last_ms, int64_t limit_ms, const char *what);

/* http_error sets status and a JSON body {"error": msg, "field": field}
 * (field omitted when NULL). */
void http_error(http_response *resp, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* http_error_begin starts the error body of a protocol handler: sets
 * status and the JSON content type and writes {"error": MSG, "field":
 * FIELD without the closing brace, so the handler can add its protocol's
 * own error member (the extender's "Error", Volcano's "status") before
 * appending "}". MSG is d->msg, or as_strerror(err) when d has none; it is
 * returned (borrowed from d, or static). */
const char *http_error_begin(http_response *resp, int status, const as_diag *d, as_err err);

/* http_status_for_err maps an as_err to an HTTP status (400 for input
 * errors, 404, 409, 413, 500, 503...). */
int http_status_for_err(as_err err);

/* http_status_for_decode_err maps an error decoding a request body: input
 * errors, a value too big for its field (AS_ETOOBIG) included, are 400;
 * running out of the request's memory budget (AS_ENOMEM) is 413; anything
 * else as http_status_for_err. */
int http_status_for_decode_err(as_err err);

#endif
