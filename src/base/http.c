/* http.c - libmicrohttpd server with a static route table (see http.h). */
#include "agentsched/base/http.h"
#include "agentsched/base/jscan.h"

#include <assert.h>
#include <errno.h>
#include <arpa/inet.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/listen.h"
#include "agentsched/base/log.h"
#include "agentsched/base/tls.h"
#include "agentsched/base/sync.h"

#define HTTP_DEFAULT_MAX_BODY   ((size_t)16 << 20)
#define HTTP_DEFAULT_CONN_LIMIT 1024
/* One client address may hold at most this many connections, so that a
 * single host (a slowloris trickling headers) cannot take every slot;
 * kube-scheduler holds a few (its parallel binds), bench clients 16. */
#define HTTP_PER_IP_CONN_LIMIT 256
/* Idle keep-alive: above Go clients' 90 s IdleConnTimeout (kube-scheduler's
 * extender client), so a POST is never sent on a connection this server has
 * just closed (Go does not resend a POST that may have arrived). */
#define HTTP_DEFAULT_TIMEOUT_S 120
/* The idle timeout restarts with every byte, so a client sending one body
 * byte a second would hold its connection (and its growing body) forever;
 * the whole request must arrive within this many idle timeouts. */
#define HTTP_DEADLINE_TIMEOUTS 2
/* Scratch memory per request: decoded pods and responses are a small
 * multiple of the body, so cap the pool relative to it. */
#define HTTP_POOL_MIN_CAP ((size_t)8 << 20)
/* Every pool thread may build a response at once, and they are as many as
 * the CPUs: at 64 MiB each a 16-core node's pod could be asked for 1 GiB
 * of answers. The largest real ones are far smaller (65536 FailedNodes
 * or 5000 placements with 16 candidates: under 10 MB). */
#define HTTP_RESPONSE_CAP ((size_t)16 << 20)
/* Most of a body allocated at once from its Content-Length (http_access). */
#define HTTP_BODY_PRESIZE ((size_t)1 << 20)
/* Request memory held at once across every connection: each of 1024
 * connections may upload up to the body cap, 16 GiB in all, and a handler
 * that decodes its body into a DOM spends about HTTP_VALUE_COST bytes a
 * JSON value (jansson, measured 220..350 bytes: a 15 MB body of "{}," took
 * 1.1 GB), so bodies are charged as they arrive and again by their values
 * before their handler runs; the sum must fit in the container
 * (docs/http.md, Limits). At least one body of the cap always fits. */
#define HTTP_BODY_BUDGET           ((size_t)512 << 20)
#define HTTP_VALUE_COST            ((size_t)256)
#define HTTP_DEFAULT_OFFLOAD_QUEUE 4096
#define HTTP_MAX_OFFLOAD_THREADS   256
/* A connection's client-certificate verdict is reused for its next
 * requests until the CA changes or it is this old, so that a certificate
 * expiring under a long keep-alive connection stops being accepted. */
#define HTTP_TLS_VERDICT_NS ((uint64_t)60 * 1000000000u)

/* Per connection (MHD's socket context), from its start to its close.
 * Requests on a connection are handled one after another, so the verdict
 * cache needs no lock. */
typedef struct http_conn {
    /* The header watchdog's view (under the server's cmu): the socket, and
     * since when the connection has been waiting for a request's headers
     * (0 while a request is being handled). */
    struct http_conn *prev, *next;
    int fd;
    uint64_t waiting_since_ns;
    bool cut;             /* shut down once already */
    tls_creds *tls;       /* the generation handshaken with */
    unsigned verdict_gen; /* the generation `status` was reached with; 0 none */
    uint64_t verdict_ns;  /* when */
    int status;           /* 0 verified, 401, 403 */
    char caller[128];     /* subject CN, "-" */
    char why[200];        /* why refused */
} http_conn;

/* Per-request state, created on the first access-handler call and freed by
 * the completion notifier whatever happened (client gone, timeout, ...). */
typedef struct http_req_state {
    pool *pool;
    buf body;
    const http_route *route;
    int early_status; /* 404/405/413/501/503 decided from the headers alone */
    bool too_big;     /* body exceeded the cap while streaming */
    size_t charged;   /* bytes of the server's request budget this request holds */
    bool answered;
    uint64_t start_ns;
    const char *caller; /* see http_request.caller */
    const char *deny;   /* why a 401/403 early_status refused the caller */
    /* Offloaded (blocking route): the job fields below are written by the
     * pool thread before it queues the job, the response by the offload
     * thread before it sets done (release) and resumes the connection;
     * the pool thread reads them after loading done (acquire). */
    bool offloaded;
    int done;
    struct http_req_state *next; /* offload queue link */
    struct MHD_Connection *conn;
    const char *method, *url; /* MHD's, valid until the request completes */
    http_response resp;
} http_req_state;

struct http_server {
    struct MHD_Daemon *daemon;
    http_server_config cfg; /* copy; routes/ctx borrowed */
    size_t max_body;
    uint64_t deadline_ns; /* a request's whole upload, from its headers */
    size_t body_budget;   /* most request memory held across connections */
    size_t body_held;     /* (atomic) bytes charged against it */
    uint16_t port;
    unsigned threads; /* pool threads */
    /* Offload threads for blocking routes: a FIFO of suspended requests. */
    pthread_mutex_t omu;
    pthread_cond_t ocv;
    http_req_state *ohead, *otail;
    size_t olen, ocap;
    bool ostopping;
    int oflight; /* (atomic) offloaded requests not yet completed by MHD */
    pthread_t *othreads;
    unsigned nothreads;
    /* MHD's last message while it starts (why a certificate or
     * key was refused): starting is set (atomically) only while
     * MHD_start_daemon runs, when only MHD's start-up logs. */
    bool starting;
    char start_msg[256];
    /* The current credentials (tmu guards the pointer; tls_gen mirrors
     * its gen for a lock-free "did it change" check), whether requests
     * need a client certificate, the start-up CA PEM (MHD reads it at
     * start) and the exempt path prefixes. */
    pthread_mutex_t tmu;
    tls_creds *tls;
    unsigned tls_gen; /* atomic */
    bool client_auth;
    char *tls_ca;
    char *exempt;
    /* The header watchdog: libmicrohttpd calls nothing of ours until a
     * request's headers are complete, and its idle timeout restarts with
     * every byte, so a client trickling headers a byte a second would hold
     * its connection forever. Every live connection is listed (cmu); the
     * watchdog shuts down the socket of one that waited longer than
     * deadline_ns for its headers, and libmicrohttpd then closes it. */
    pthread_mutex_t cmu;
    pthread_cond_t ccv; /* CLOCK_MONOTONIC; wakes the watchdog to stop */
    http_conn *conns;
    pthread_t watchdog;
    bool watchdog_started, watchdog_stop;
};

/* ------------------------------------------------------------------ */
/* Errors and status codes                                            */
/* ------------------------------------------------------------------ */

/* See http.h. */
void http_error(http_response *resp, int status, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    resp->status = status;
    resp->content_type = "application/json";
    buf_reset(&resp->body);
    buf_puts(&resp->body, "{\"error\": ");
    buf_json_cstr(&resp->body, msg);
    if (field) {
        buf_puts(&resp->body, ", \"field\": ");
        buf_json_cstr(&resp->body, field);
    }
    buf_puts(&resp->body, "}\n");
}

/* See http.h. */
bool http_stalled(http_response *resp, int64_t last_ms, int64_t limit_ms, const char *what)
{
    int64_t now = clock_mono_ms();
    if (!last_ms || now - last_ms <= limit_ms)
        return false;
    resp->status = 503;
    resp->content_type = "text/plain";
    buf_reset(&resp->body);
    buf_printf(&resp->body, "stalled: %s has shown no sign of life for %lld s\n", what,
               (long long)((now - last_ms) / 1000));
    return true;
}

/* See http.h. */
const char *http_error_begin(http_response *resp, int status, const as_diag *d, as_err err)
{
    const char *msg = d && d->msg[0] ? d->msg : as_strerror(err);
    buf *o = &resp->body;
    resp->status = status;
    resp->content_type = "application/json";
    buf_reset(o);
    buf_puts(o, "{\"error\":");
    buf_json_cstr(o, msg);
    buf_puts(o, ",\"field\":");
    buf_json_cstr(o, d ? d->field : "");
    return msg;
}

/* See http.h. */
int http_status_for_err(as_err err)
{
    switch (err) {
    case AS_OK:
        return 200;
    case AS_EINVAL:
    case AS_EPARSE:
    case AS_ERANGE:
        return 400;
    case AS_EAUTH:
        return 401;
    case AS_ENOTFOUND:
        return 404;
    case AS_EEXIST:
    case AS_ECONFLICT:
        return 409;
    case AS_EGONE:
        return 410;
    case AS_ETOOBIG:
        return 413;
    case AS_EUNSCHED:
        return 422;
    case AS_ELIMIT:
        return 429;
    case AS_EUNSUPPORTED:
        return 501;
    case AS_EHTTP:
    case AS_EIO:
        return 502;
    case AS_ETIMEOUT:
        return 504;
    case AS_ENOMEM:
        return 503;
    case AS_EINTERNAL:
    default:
        return 500;
    }
}

/* See http.h. */
int http_status_for_decode_err(as_err err)
{
    switch (err) {
    case AS_EINVAL:
    case AS_EPARSE:
    case AS_ERANGE:
    case AS_ETOOBIG:
        return 400;
    case AS_ENOMEM:
        return 413;
    default:
        return http_status_for_err(err);
    }
}

/* See http.h. */
const char *http_request_query(const http_request *req, const char *key)
{
    if (!req || !req->conn || !key)
        return NULL;
    return MHD_lookup_connection_value((struct MHD_Connection *)req->conn, MHD_GET_ARGUMENT_KIND,
                                       key);
}

/* ------------------------------------------------------------------ */
/* Routing                                                            */
/* ------------------------------------------------------------------ */

/* Finds the route for (method, path). HEAD uses the GET route (MHD drops
 * the body). When the path exists with other methods, *path_known is set
 * so the caller answers 405 rather than 404. */
static const http_route *http_route_find(const http_server *s, const char *method, const char *path,
                                         bool *path_known)
{
    *path_known = false;
    bool head = strcmp(method, "HEAD") == 0;
    for (size_t i = 0; i < s->cfg.nroutes; i++) {
        const http_route *r = &s->cfg.routes[i];
        if (strcmp(r->path, path) != 0)
            continue;
        *path_known = true;
        if (strcmp(r->method, method) == 0 || (head && strcmp(r->method, "GET") == 0))
            return r;
    }
    return NULL;
}

/* Allow header value: every method registered for path. */
static void http_allow_header(const http_server *s, const char *path, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < s->cfg.nroutes; i++) {
        const http_route *r = &s->cfg.routes[i];
        if (strcmp(r->path, path) != 0)
            continue;
        int n = snprintf(out + used, len - used, "%s%s", used ? ", " : "", r->method);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
        if (strcmp(r->method, "GET") == 0) {
            n = snprintf(out + used, len - used, ", HEAD");
            if (n > 0 && (size_t)n < len - used)
                used += (size_t)n;
        }
    }
}

/* ------------------------------------------------------------------ */
/* TLS credentials and client certificates                            */
/* ------------------------------------------------------------------ */

/* The current credentials with a reference for the caller; NULL for a
 * plain-HTTP server. */
static tls_creds *http_tls_current(http_server *s)
{
    pthread_mutex_lock(&s->tmu);
    tls_creds *t = tls_creds_ref(s->tls);
    pthread_mutex_unlock(&s->tmu);
    return t;
}

/* GnuTLS asks for the serving chain at each handshake: the generation the
 * connection took when it started. */
static int http_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                             const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                             gnutls_pcert_st **pcert, unsigned int *pcert_length,
                             gnutls_privkey_t *pkey)
{
    (void)req_ca_dn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    struct MHD_Connection *conn = gnutls_session_get_ptr(session);
    const union MHD_ConnectionInfo *ci =
        conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
    http_conn *hc = ci ? ci->socket_context : NULL;
    /* no generation: out of memory when the connection started; fail it */
    return tls_creds_serve(hc ? hc->tls : NULL, session, pcert, pcert_length, pkey);
}

static void http_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                             enum MHD_ConnectionNotificationCode code)
{
    http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        http_conn *hc = calloc(1, sizeof *hc);
        if (hc) {
            hc->tls = http_tls_current(s);
            const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
            hc->fd = ci ? ci->connect_fd : -1;
            pthread_mutex_lock(&s->cmu);
            hc->waiting_since_ns = clock_mono_ns();
            hc->next = s->conns;
            if (s->conns)
                s->conns->prev = hc;
            s->conns = hc;
            pthread_mutex_unlock(&s->cmu);
        }
        *socket_context = hc;
        return;
    }
    /* Closed: libmicrohttpd says so before it closes the socket, so the
     * watchdog never shuts down a descriptor reused by another. */
    http_conn *hc = *socket_context;
    if (hc) {
        pthread_mutex_lock(&s->cmu);
        if (hc->prev)
            hc->prev->next = hc->next;
        else
            s->conns = hc->next;
        if (hc->next)
            hc->next->prev = hc->prev;
        pthread_mutex_unlock(&s->cmu);
        tls_creds_unref(hc->tls);
        free(hc);
    }
    *socket_context = NULL;
}

/* http_conn_waiting marks conn as waiting for its next request's headers
 * (since now) or not (a request is being handled). */
static void http_conn_waiting(http_server *s, struct MHD_Connection *conn, bool waiting)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    http_conn *hc = ci ? ci->socket_context : NULL;
    if (!hc)
        return;
    pthread_mutex_lock(&s->cmu);
    hc->waiting_since_ns = waiting ? clock_mono_ns() : 0;
    pthread_mutex_unlock(&s->cmu);
}

/* The header watchdog (see struct http_server): every quarter of the
 * deadline, at most a second. */
static void *http_watchdog_main(void *arg)
{
    http_server *s = arg;
    pthread_setname_np(pthread_self(), "as-http-wdog");
    int64_t period_ms = (int64_t)(s->deadline_ns / 4000000u);
    if (period_ms > 1000)
        period_ms = 1000;
    if (period_ms < 10)
        period_ms = 10;
    pthread_mutex_lock(&s->cmu);
    while (!s->watchdog_stop) {
        struct timespec ts = clock_deadline_ms(period_ms);
        pthread_cond_timedwait(&s->ccv, &s->cmu, &ts);
        uint64_t now = clock_mono_ns();
        for (http_conn *hc = s->conns; hc; hc = hc->next) {
            if (hc->cut || !hc->waiting_since_ns || hc->fd < 0 ||
                now - hc->waiting_since_ns <= s->deadline_ns)
                continue;
            hc->cut = true;
            shutdown(hc->fd, SHUT_RDWR);
            log_debug("msg=\"request headers not received within the deadline, closing\"");
        }
    }
    pthread_mutex_unlock(&s->cmu);
    return NULL;
}

/* http_client_verify settles whether hc's client certificate chains to the
 * current client CA, reusing the last verdict while the CA is unchanged
 * and it is younger than HTTP_TLS_VERDICT_NS (a connection's peer
 * certificate cannot change: libmicrohttpd does not renegotiate). */
static void http_client_verify(http_server *s, struct MHD_Connection *conn, http_conn *hc)
{
    uint64_t now = clock_mono_ns();
    if (hc->verdict_gen == __atomic_load_n(&s->tls_gen, __ATOMIC_ACQUIRE) &&
        now - hc->verdict_ns < HTTP_TLS_VERDICT_NS)
        return;
    tls_creds *cur = http_tls_current(s);
    hc->verdict_gen = cur ? tls_creds_gen(cur) : 0;
    hc->verdict_ns = now;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    char cn[128];
    hc->status =
        tls_verify_client(cur, ci ? ci->tls_session : NULL, cn, sizeof cn, hc->why, sizeof hc->why);
    snprintf(hc->caller, sizeof hc->caller, "-");
    if (hc->status == 0 && cn[0])
        as_printable(hc->caller, sizeof hc->caller, cn);
    tls_creds_unref(cur);
}

/* Whether path starts with one of the --tls-client-auth-exempt prefixes. */
static bool http_exempt(const http_server *s, const char *path)
{
    for (const char *p = s->exempt; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && strncmp(path, p, len) == 0)
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

/* http_peer_addr writes the client's numeric address into host[0..hlen)
 * ("127.0.0.1", "::1") and with its port into remote[0..rlen)
 * ("127.0.0.1:5000", "[::1]:5000"); both "" when unknown. inet_ntop, not
 * getnameinfo: no request waits on a resolver. */
static void http_peer_addr(struct MHD_Connection *conn, char *host, size_t hlen, char *remote,
                           size_t rlen)
{
    host[0] = remote[0] = '\0';
    const union MHD_ConnectionInfo *ci =
        conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    const void *a;
    unsigned port;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        a = &in->sin_addr;
        port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        a = &in6->sin6_addr;
        port = ntohs(in6->sin6_port);
    } else {
        return;
    }
    if (!inet_ntop(sa->sa_family, a, host, (socklen_t)hlen)) {
        host[0] = '\0';
        return;
    }
    snprintf(remote, rlen, sa->sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
}

/* http_authorize decides, on a request's first call, who the caller is and
 * whether its route may be called: a refusal becomes st's early_status
 * (401/403) with st->deny saying why, and is logged with the peer. */
static void http_authorize(http_server *s, struct MHD_Connection *conn, http_req_state *st,
                           const char *method, const char *url)
{
    st->caller = "-";
    if (!s->client_auth)
        return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    http_conn *hc = ci ? ci->socket_context : NULL;
    bool open = st->route && (st->route->anonymous || http_exempt(s, url));
    if (!hc) {
        if (!open && st->route) {
            st->early_status = 503;
            st->deny = "out of memory";
        }
        return;
    }
    http_client_verify(s, conn, hc);
    if (hc->status == 0)
        st->caller = hc->caller;
    if (open || !st->route || hc->status == 0)
        return;
    st->early_status = hc->status;
    st->deny = hc->why;
    char host[INET6_ADDRSTRLEN], peer[INET6_ADDRSTRLEN + 16];
    http_peer_addr(conn, host, sizeof host, peer, sizeof peer);
    char p[128], m[16];
    as_printable(p, sizeof p, url);
    as_printable(m, sizeof m, method);
    log_warn("msg=\"request refused: client certificate\" status=%d peer=%s method=%s path=%s "
             "reason=\"%s\"",
             hc->status, peer[0] ? peer : "-", m, p, hc->why);
}

/* ------------------------------------------------------------------ */
/* MHD callbacks                                                      */
/* ------------------------------------------------------------------ */

static enum MHD_Result http_send(http_server *s, struct MHD_Connection *conn, http_req_state *st,
                                 const char *method, const char *path, http_response *resp)
{
    char *data = NULL;
    size_t len = 0;
    if (resp->body.err) {
        /* The handler overflowed its response cap or ran out of memory:
         * the partial body is useless, say so instead. */
        as_err e = resp->body.err;
        buf_free(&resp->body);
        buf_init(&resp->body, 0);
        http_error(resp, 500, NULL, "response could not be built: %s", as_strerror(e));
    }
    if (resp->body.len > 0 && buf_take(&resp->body, &data, &len) != AS_OK) {
        data = NULL;
        len = 0;
    }
    struct MHD_Response *r;
    if (data)
        r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    else
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(data);
        buf_free(&resp->body);
        return MHD_NO;
    }
    buf_free(&resp->body);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            resp->content_type ? resp->content_type : "application/json");
    if (resp->status == 405) {
        char allow[128];
        http_allow_header(s, path, allow, sizeof allow);
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    }
    if (resp->retry_after_s) {
        char secs[16];
        snprintf(secs, sizeof secs, "%u", resp->retry_after_s);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, secs);
    }
    int status = resp->status ? resp->status : 200;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    if (ret == MHD_YES) {
        st->answered = true;
        if (s->cfg.observe)
            s->cfg.observe(s->cfg.ctx, method, path, st->caller ? st->caller : "-", status,
                           clock_mono_ns() - st->start_ns);
    }
    return ret;
}

static enum MHD_Result http_send_error(http_server *s, struct MHD_Connection *conn,
                                       http_req_state *st, const char *method, const char *path,
                                       int status)
{
    http_response resp = {.status = status};
    buf_init(&resp.body, 4096);
    /* The path and method are the client's bytes, percent-decoded: show
     * them as printable ASCII, so the JSON answer stays valid UTF-8. */
    char p[256], m[32];
    as_printable(p, sizeof p, path);
    as_printable(m, sizeof m, method);
    switch (status) {
    case 404:
        http_error(&resp, 404, NULL, "no such endpoint: %s", p);
        break;
    case 405:
        http_error(&resp, 405, NULL, "method %s not allowed on %s", m, p);
        break;
    case 501:
        http_error(&resp, 501, NULL,
                   "Transfer-Encoding other than chunked is not supported; send the body with "
                   "Content-Length or Transfer-Encoding: chunked");
        break;
    case 401:
    case 403:
        http_error(&resp, status, "client-certificate", "%s",
                   st->deny ? st->deny : "client certificate refused");
        break;
    case 503:
        /* refused by the client-certificate check (st->deny says why), or
         * the request bodies' memory budget is full */
        if (st->deny) {
            http_error(&resp, 503, "client-certificate", "%s", st->deny);
            break;
        }
        resp.retry_after_s = 1;
        http_error(&resp, 503, NULL,
                   "the server holds %zu bytes of request bodies, its limit; retry shortly",
                   s->body_budget);
        break;
    case 413:
        http_error(&resp, 413, NULL,
                   "request body larger than %zu bytes; raise --max-body if this is intended",
                   s->max_body);
        break;
    default:
        http_error(&resp, status, NULL, "request rejected");
        break;
    }
    return http_send(s, conn, st, method, path, &resp);
}

/* Parses a Content-Length header value; false when absent or malformed
 * (MHD itself rejects malformed values before we are called). */
static bool http_content_length(struct MHD_Connection *conn, uint64_t *out)
{
    const char *v =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!v || !*v)
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || !end || *end)
        return false;
    *out = n;
    return true;
}

/* ------------------------------------------------------------------ */
/* Offload threads (blocking routes)                                  */
/* ------------------------------------------------------------------ */

/* http_run_handler runs st's route handler on its request body (and the
 * pool the caller created) into *resp: the same call on a pool thread or,
 * for a blocking route, on an offload thread. */
static void http_run_handler(http_server *s, http_req_state *st, struct MHD_Connection *conn,
                             const char *method, const char *url, http_response *resp)
{
    char remote[INET6_ADDRSTRLEN + 16];
    *resp = (http_response){.status = 200, .content_type = "application/json"};
    buf_init(&resp->body, HTTP_RESPONSE_CAP);
    http_request req = {
        .method = method,
        .path = url,
        .body = st->body.data ? st->body.data : "",
        .body_len = st->body.len,
        .pool = st->pool,
        .conn = conn,
        .caller = st->caller ? st->caller : "-",
        .remote = remote,
        .server = s,
        .state = st,
    };
    http_peer_addr(conn, req.peer, sizeof req.peer, remote, sizeof remote);
    st->route->fn(st->route->ctx ? st->route->ctx : s->cfg.ctx, &req, resp);
}

static void *http_offload_main(void *arg)
{
    http_server *s = arg;
    pthread_setname_np(pthread_self(), "as-http-offload");
    for (;;) {
        pthread_mutex_lock(&s->omu);
        while (!s->ohead && !s->ostopping)
            pthread_cond_wait(&s->ocv, &s->omu);
        http_req_state *st = s->ohead;
        if (st) {
            s->ohead = st->next;
            if (!s->ohead)
                s->otail = NULL;
            s->olen--;
        }
        bool stopping = s->ostopping;
        pthread_mutex_unlock(&s->omu);
        if (!st)
            break; /* stopping and drained */
        if (stopping) {
            /* Shutting down: answer what is still queued without starting
             * new round trips (the service behind them is going away). */
            st->resp = (http_response){.status = 503};
            buf_init(&st->resp.body, 4096);
            http_error(&st->resp, 503, NULL, "agentsched is shutting down; retry");
        } else {
            http_run_handler(s, st, st->conn, st->method, st->url, &st->resp);
        }
        struct MHD_Connection *conn = st->conn;
        __atomic_store_n(&st->done, 1, __ATOMIC_RELEASE);
        /* st may be freed by MHD from here on (completion callback). */
        MHD_resume_connection(conn);
    }
    return NULL;
}

/* http_offload suspends st's connection and queues st; false (nothing
 * done) when the queue is at its cap or the server is stopping. Called
 * from the access handler, as MHD_suspend_connection must be. */
static bool http_offload(http_server *s, http_req_state *st)
{
    pthread_mutex_lock(&s->omu);
    bool ok = !s->ostopping && s->olen < s->ocap;
    if (ok) {
        /* Suspend before an offload thread can see st: it resumes at once
         * when done. */
        MHD_suspend_connection(st->conn);
        st->next = NULL;
        if (s->otail)
            s->otail->next = st;
        else
            s->ohead = st;
        s->otail = st;
        s->olen++;
        __atomic_add_fetch(&s->oflight, 1, __ATOMIC_RELAXED);
        pthread_cond_signal(&s->ocv);
    }
    pthread_mutex_unlock(&s->omu);
    return ok;
}

/* http_offload_stop answers what is queued with 503, lets running handlers
 * finish and joins the threads; every suspended connection is resumed. */
static void http_offload_stop(http_server *s)
{
    if (!s->othreads)
        return;
    pthread_mutex_lock(&s->omu);
    s->ostopping = true;
    pthread_cond_broadcast(&s->ocv);
    pthread_mutex_unlock(&s->omu);
    for (unsigned i = 0; i < s->nothreads; i++)
        pthread_join(s->othreads[i], NULL);
    /* Resumed connections still have their answers to send: give MHD up
     * to 2 s before stopping it closes them. */
    for (int i = 0; i < 200 && __atomic_load_n(&s->oflight, __ATOMIC_ACQUIRE) > 0; i++)
        usleep(10000);
    free(s->othreads);
    s->othreads = NULL;
    s->nothreads = 0;
}

/* http_charge grows st's share of the body budget to total bytes; false
 * (nothing charged) when that would take the server past its budget. */
static bool http_charge(http_server *s, http_req_state *st, size_t total)
{
    if (total <= st->charged)
        return true;
    size_t more = total - st->charged;
    size_t held = __atomic_load_n(&s->body_held, __ATOMIC_RELAXED);
    do {
        if (held + more > s->body_budget)
            return false;
    } while (!__atomic_compare_exchange_n(&s->body_held, &held, held + more, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    st->charged = total;
    return true;
}

/* http_charge_values charges st's body plus HTTP_VALUE_COST a JSON value;
 * false with *busy answered (its body initialised) when it does not fit. */
static bool http_charge_values(http_server *s, http_req_state *st, http_response *busy)
{
    size_t values = jscan_count_values(st->body.data, st->body.len);
    uint64_t need64 = (uint64_t)st->body.len + (uint64_t)values * HTTP_VALUE_COST;
    size_t need = need64 > SIZE_MAX ? SIZE_MAX : (size_t)need64;
    if (http_charge(s, st, need))
        return true;
    if (!busy->body.cap)
        buf_init(&busy->body, 4096);
    if (need > s->body_budget) {
        http_error(busy, 413, NULL,
                   "the body holds about %zu JSON values, more than the %zu the "
                   "server decodes in one request; send fewer",
                   values, (s->body_budget - st->body.len) / HTTP_VALUE_COST);
    } else {
        busy->retry_after_s = 1;
        http_error(busy, 503, NULL,
                   "the server is decoding %zu bytes of requests, its limit; retry "
                   "shortly",
                   s->body_budget);
    }
    return false;
}

/* See http.h. */
as_err http_request_charge_dom(const http_request *req, http_response *resp)
{
    http_server *s = req->server;
    http_req_state *st = req->state;
    if (!s || !st || !st->body.len)
        return AS_OK;
    return http_charge_values(s, st, resp) ? AS_OK : AS_ELIMIT;
}

static enum MHD_Result http_access(void *cls, struct MHD_Connection *conn, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls)
{
    http_server *s = cls;
    http_req_state *st = *con_cls;

    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st)
            return MHD_NO;
        *con_cls = st;
        st->start_ns = clock_mono_ns();
        http_conn_waiting(s, conn, false);
        bool path_known = false;
        st->route = http_route_find(s, method, url, &path_known);
        if (!st->route)
            st->early_status = path_known ? 405 : 404;
        http_authorize(s, conn, st, method, url);
        /* libmicrohttpd decodes chunked bodies only; with another
         * Transfer-Encoding ("gzip, chunked", "identity") it would wait for
         * a body it cannot frame until the idle timeout. Say so at once. */
        const char *te =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        if (!st->early_status && te && strcasecmp(te, "chunked") != 0)
            st->early_status = 501;
        uint64_t clen = 0;
        bool has_clen = http_content_length(conn, &clen);
        if (!st->early_status && has_clen && clen > s->max_body)
            st->early_status = 413;
        /* A body the budget cannot hold now is refused before it is read,
         * so the client may retry; one streamed without a length is
         * charged as it arrives (below). */
        if (!st->early_status && has_clen && clen > 0 && !http_charge(s, st, (size_t)clen))
            st->early_status = 503;
        if (st->early_status) {
            /* A request without a body (GET, HEAD, an empty POST) is
             * answered on the next call, once MHD holds the whole request,
             * so that its keep-alive connection stays open. One with a
             * body is answered now, before reading it: MHD then refuses the
             * rest of the upload and closes the connection after the
             * response. */
            bool bodyless = has_clen ? clen == 0 : !te;
            if (bodyless)
                return MHD_YES;
            return http_send_error(s, conn, st, method, url, st->early_status);
        }
        buf_init(&st->body, s->max_body);
        /* Sized once from Content-Length instead of doubling through every
         * power of two up to it (a 900 KB full-Nodes filter: 12 reallocs);
         * at most HTTP_BODY_PRESIZE, so a header alone cannot make us
         * allocate the whole cap. A failure is sticky and answered as an
         * append failure would be. */
        if (clen > 0)
            (void)buf_reserve(&st->body, clen < HTTP_BODY_PRESIZE ? clen : HTTP_BODY_PRESIZE);
        return MHD_YES;
    }

    if (st->answered) {
        /* Already answered (early error); drop whatever MHD still hands us. */
        *upload_data_size = 0;
        return MHD_YES;
    }

    if (st->early_status) {
        /* A bodyless request refused from its headers (see above): its
         * whole request is here now. Anything MHD hands us is dropped. */
        if (*upload_data_size > 0) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        return http_send_error(s, conn, st, method, url, st->early_status);
    }

    if (st->offloaded) {
        /* Called again after the offload thread resumed the connection. */
        *upload_data_size = 0;
        if (!__atomic_load_n(&st->done, __ATOMIC_ACQUIRE))
            return MHD_YES; /* not ours to answer yet */
        return http_send(s, conn, st, method, url, &st->resp);
    }

    if (*upload_data_size > 0) {
        if (clock_mono_ns() - st->start_ns > s->deadline_ns) {
            /* A trickled body: MHD cannot answer mid-upload, so close. */
            log_debug("msg=\"request body not received within the deadline, closing\" path=%s",
                      url);
            *upload_data_size = 0;
            return MHD_NO;
        }
        if (!http_charge(s, st, st->body.len + *upload_data_size)) {
            /* Mid-upload MHD cannot answer: close, as for the cap. */
            log_debug("msg=\"request bodies over the server's budget, closing\" path=%s", url);
            *upload_data_size = 0;
            return MHD_NO;
        }
        if (!st->too_big) {
            if (buf_append(&st->body, upload_data, *upload_data_size) != AS_OK) {
                st->too_big = st->body.err == AS_ETOOBIG;
                buf_free(&st->body);
                if (!st->too_big) {
                    *upload_data_size = 0;
                    return MHD_NO;
                }
            }
        }
        *upload_data_size = 0;
        if (st->too_big) {
            /* Chunked body past the cap: MHD cannot answer mid-upload, and
             * reading on would let a client stream forever. Close. */
            log_debug("msg=\"request body over cap, closing\" path=%s", url);
            return MHD_NO;
        }
        return MHD_YES;
    }

    /* Whole request received: charge what decoding it will take, then
     * run the handler (a scanning route's handler charges it itself if it
     * builds a DOM). */
    if (st->body.len > 0 && !st->route->scans) {
        http_response busy = {.status = 503};
        if (!http_charge_values(s, st, &busy))
            return http_send(s, conn, st, method, url, &busy);
    }
    st->pool = pool_new(s->max_body * 8 > HTTP_POOL_MIN_CAP ? s->max_body * 8 : HTTP_POOL_MIN_CAP);
    if (!st->pool)
        return MHD_NO;
    if (st->route->blocking && s->othreads) {
        st->offloaded = true;
        st->conn = conn;
        st->method = method;
        st->url = url;
        if (http_offload(s, st))
            return MHD_YES; /* answered when MHD calls again after the resume */
        st->offloaded = false;
        http_response busy = {.status = 503};
        buf_init(&busy.body, 4096);
        http_error(&busy, 503, NULL,
                   "%zu requests are already waiting for an API-server round trip; retry "
                   "shortly",
                   s->ocap);
        return http_send(s, conn, st, method, url, &busy);
    }
    http_response resp;
    http_run_handler(s, st, conn, method, url, &resp);
    return http_send(s, conn, st, method, url, &resp);
}

static void http_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                           enum MHD_RequestTerminationCode toe)
{
    http_server *s = cls;
    http_req_state *st = *con_cls;
    if (!st)
        return;
    /* the connection now waits for its next request's headers */
    http_conn_waiting(s, conn, true);
    if (st->offloaded)
        __atomic_sub_fetch(&s->oflight, 1, __ATOMIC_RELEASE);
    buf_free(&st->body);
    if (st->charged)
        __atomic_sub_fetch(&s->body_held, st->charged, __ATOMIC_RELAXED);
    if (st->offloaded)
        buf_free(&st->resp.body); /* http_send frees it; not when never sent */
    pool_free(st->pool);
    free(st);
    *con_cls = NULL;
}

static void http_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    http_server *s = cls;
    if (s && __atomic_load_n(&s->starting, __ATOMIC_ACQUIRE))
        snprintf(s->start_msg, sizeof s->start_msg, "%s", line);
    log_debug("msg=\"libmicrohttpd: %s\"", line);
}

/* ------------------------------------------------------------------ */
/* Start / stop                                                       */
/* ------------------------------------------------------------------ */

static int http_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* http_unescape decodes %XX in the path and the query arguments in place,
 * as libmicrohttpd's own unescaper does, except %00: decoded, it would cut
 * the string short ("/metrics%00.html" would route as "/metrics"), so it is
 * left as it is and matches no route. */
static size_t http_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    char *w = s;
    for (const char *r = s; *r;) {
        int hi, lo;
        if (r[0] == '%' && (hi = http_hexval(r[1])) >= 0 && (lo = http_hexval(r[2])) >= 0 &&
            (hi | lo) != 0) {
            *w++ = (char)(hi << 4 | lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* See http.h. */
as_err http_server_start(const http_server_config *cfg, http_server **out, as_diag *diag)
{
    *out = NULL;
    if (!cfg || !cfg->routes)
        return as_diag_set(diag, AS_EINVAL, NULL, "HTTP server needs a route table");
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    bool v6 = false;
    as_err err = listen_resolve(cfg->listen, &ss, &sslen, &v6, diag);
    if (err)
        return err;

    http_server *s = calloc(1, sizeof *s);
    if (!s)
        return AS_ENOMEM;
    s->cfg = *cfg;
    s->max_body = cfg->max_body ? cfg->max_body : HTTP_DEFAULT_MAX_BODY;
    s->body_budget = cfg->body_budget ? cfg->body_budget : HTTP_BODY_BUDGET;
    if (s->body_budget < s->max_body)
        s->body_budget = s->max_body;
    unsigned threads = cfg->threads;
    if (threads == 0) {
        /* the CPUs this process may use, not the machine's: a container
         * limited to 2 CPUs on a 64-core node would otherwise run 64
         * threads and be throttled every period */
        sync_cpus cpus;
        sync_usable_cpus(NULL, &cpus);
        threads = cpus.usable < HTTP_MAX_THREADS ? cpus.usable : HTTP_MAX_THREADS;
    }
    if (threads > HTTP_MAX_THREADS) {
        free(s);
        return as_diag_set(diag, AS_EINVAL, "threads", "at most %d HTTP threads, not %u",
                           HTTP_MAX_THREADS, threads);
    }
    s->threads = threads;

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES)
        flags |= MHD_USE_EPOLL;
    else if (MHD_is_feature_supported(MHD_FEATURE_POLL) == MHD_YES)
        flags |= MHD_USE_POLL;
    if (v6)
        flags |= MHD_USE_IPv6;
    bool tls = cfg->tls_cert_pem || cfg->tls_key_pem;
    if (tls) {
        if (!cfg->tls_cert_pem || !cfg->tls_key_pem) {
            free(s);
            return as_diag_set(diag, AS_EINVAL, cfg->tls_cert_pem ? "tls-key" : "tls-cert",
                               "HTTPS needs both a certificate and its private key");
        }
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            free(s);
            return as_diag_set(diag, AS_EINVAL, "tls-cert",
                               "this libmicrohttpd was built without TLS; install Debian's "
                               "libmicrohttpd12 (built with GnuTLS) or serve plain HTTP");
        }
        err = tls_creds_load(cfg->tls_cert_pem, cfg->tls_key_pem, cfg->tls_client_ca_pem, false,
                             &s->tls, diag);
        if (err == AS_OK && cfg->tls_client_ca_pem &&
            (!(s->tls_ca = strdup(cfg->tls_client_ca_pem)) ||
             (cfg->tls_client_exempt && !(s->exempt = strdup(cfg->tls_client_exempt)))))
            err = AS_ENOMEM;
        if (err) {
            tls_creds_unref(s->tls);
            free(s->tls_ca);
            free(s);
            return err;
        }
        tls_creds_set_gen(s->tls, 1);
        s->tls_gen = 1;
        s->client_auth = cfg->tls_client_ca_pem != NULL;
        flags |= MHD_USE_TLS;
    } else if (cfg->tls_client_ca_pem) {
        free(s);
        return as_diag_set(diag, AS_EINVAL, "tls-client-ca",
                           "client certificates need HTTPS: give the certificate and key too");
    }
    pthread_mutex_init(&s->tmu, NULL);
    pthread_mutex_init(&s->cmu, NULL);
    clock_cond_init(&s->ccv);

    unsigned conn_limit = cfg->conn_limit ? cfg->conn_limit : HTTP_DEFAULT_CONN_LIMIT;
    unsigned timeout = cfg->timeout_s ? cfg->timeout_s : HTTP_DEFAULT_TIMEOUT_S;
    s->deadline_ns = (uint64_t)timeout * HTTP_DEADLINE_TIMEOUTS * 1000000000u;
    /* The logger goes first so that warnings about later options use it;
     * optional options are appended, MHD_OPTION_END closes the array. */
    struct MHD_OptionItem opts[16];
    size_t no = 0;
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)http_mhd_log, s};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &ss};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)timeout, NULL};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, (intptr_t)conn_limit, NULL};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)http_completed, s};
    opts[no++] =
        (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)http_conn_notify, s};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_BACKLOG_SIZE, 512, NULL};
    opts[no++] = (struct MHD_OptionItem){
        MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (intptr_t)(conn_limit < HTTP_PER_IP_CONN_LIMIT ? conn_limit : HTTP_PER_IP_CONN_LIMIT),
        NULL};
    opts[no++] =
        (struct MHD_OptionItem){MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)http_unescape, NULL};
    if (tls) {
        /* The chain and key are handed over per handshake (not as PEM
         * options, which fix them for the daemon's life), so that
         * http_server_set_tls can replace them for new connections. */
        opts[no++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0,
                                             (void *)(intptr_t)http_tls_retrieve};
        /* A trust list makes MHD ask each client for a certificate (as
         * optional: a client without one still completes the handshake and
         * is refused per route, so probes work); requests are verified by
         * http_client_verify against the current CA, not by GnuTLS. */
        if (s->tls_ca)
            opts[no++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, s->tls_ca};
    }
    /* a pool of one thread is the internal polling thread itself */
    if (threads > 1)
        opts[no++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    assert(no <= sizeof opts / sizeof opts[0]);
    unsigned noff = cfg->offload_threads;
    if (noff > HTTP_MAX_OFFLOAD_THREADS)
        noff = HTTP_MAX_OFFLOAD_THREADS;
    if (noff)
        flags |= MHD_ALLOW_SUSPEND_RESUME;
    pthread_mutex_init(&s->omu, NULL);
    pthread_cond_init(&s->ocv, NULL);
    s->ocap = cfg->offload_queue ? cfg->offload_queue : HTTP_DEFAULT_OFFLOAD_QUEUE;
    __atomic_store_n(&s->starting, true, __ATOMIC_RELEASE);
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, http_access, s, MHD_OPTION_ARRAY, opts,
                                 MHD_OPTION_END);
    __atomic_store_n(&s->starting, false, __ATOMIC_RELEASE);
    if (!s->daemon) {
        pthread_cond_destroy(&s->ocv);
        pthread_mutex_destroy(&s->omu);
        /* MHD says why in its log: a refused certificate or key, or the
         * socket. */
        bool tls_refused =
            tls && (strstr(s->start_msg, "x509") || strstr(s->start_msg, "TLS") ||
                    strstr(s->start_msg, "certificate") || strstr(s->start_msg, "key"));
        as_err err = tls_refused
                         ? as_diag_set(diag, AS_EINVAL, "tls-cert",
                                       "the TLS certificate or key was refused (%s); give a PEM "
                                       "certificate and the PEM private key that matches it",
                                       s->start_msg)
                         : as_diag_set(diag, AS_EIO, "listen",
                                       "cannot listen on %s (address in use or not available%s%s)",
                                       cfg->listen, s->start_msg[0] ? ": " : "", s->start_msg);
        pthread_mutex_destroy(&s->tmu);
        pthread_mutex_destroy(&s->cmu);
        pthread_cond_destroy(&s->ccv);
        tls_creds_unref(s->tls);
        free(s->tls_ca);
        free(s->exempt);
        free(s);
        return err;
    }
    if (pthread_create(&s->watchdog, NULL, http_watchdog_main, s) != 0) {
        http_server_stop(s);
        return as_diag_set(diag, AS_ENOMEM, NULL,
                           "cannot start the HTTP header watchdog thread; raise the process "
                           "thread limit (ulimit -u)");
    }
    s->watchdog_started = true;
    if (noff) {
        s->othreads = calloc(noff, sizeof *s->othreads);
        for (unsigned i = 0; s->othreads && i < noff; i++) {
            if (pthread_create(&s->othreads[i], NULL, http_offload_main, s) != 0)
                break;
            s->nothreads++;
        }
        if (s->nothreads < noff) {
            http_server_stop(s);
            return as_diag_set(
                diag, AS_ENOMEM, NULL,
                "cannot start %u HTTP offload threads; raise the process thread limit "
                "(ulimit -u)",
                noff);
        }
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    *out = s;
    return AS_OK;
}

/* See http.h. */
void http_server_stop(http_server *s)
{
    if (!s)
        return;
    /* Offloaded requests first: MHD must not be stopped with connections
     * still suspended. */
    http_offload_stop(s);
    if (s->watchdog_started) {
        pthread_mutex_lock(&s->cmu);
        s->watchdog_stop = true;
        pthread_cond_signal(&s->ccv);
        pthread_mutex_unlock(&s->cmu);
        pthread_join(s->watchdog, NULL);
    }
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    pthread_cond_destroy(&s->ocv);
    pthread_mutex_destroy(&s->omu);
    pthread_mutex_destroy(&s->tmu);
    pthread_mutex_destroy(&s->cmu);
    pthread_cond_destroy(&s->ccv);
    tls_creds_unref(s->tls);
    free(s->tls_ca);
    free(s->exempt);
    free(s);
}

/* See http.h. */
as_err http_server_set_tls(http_server *s, const char *cert_pem, const char *key_pem,
                           const char *client_ca_pem, as_diag *diag)
{
    if (!s || !s->tls)
        return as_diag_set(diag, AS_EINVAL, "tls-cert",
                           "this server does not serve HTTPS; restart it with a certificate");
    if (!cert_pem || !key_pem)
        return as_diag_set(diag, AS_EINVAL, cert_pem ? "tls-key" : "tls-cert",
                           "HTTPS needs both a certificate and its private key");
    if (!client_ca_pem != !s->client_auth)
        return as_diag_set(diag, AS_EINVAL, "tls-client-ca",
                           "client authentication is switched %s only at start-up; restart the "
                           "server",
                           s->client_auth ? "off" : "on");
    tls_creds *t = NULL;
    as_err err = tls_creds_load(cert_pem, key_pem, client_ca_pem,
                                client_ca_pem && strcmp(client_ca_pem, s->tls_ca) != 0, &t, diag);
    if (err)
        return err;
    pthread_mutex_lock(&s->tmu);
    tls_creds *old = s->tls;
    tls_creds_set_gen(t, tls_creds_gen(old) + 1);
    s->tls = t;
    __atomic_store_n(&s->tls_gen, tls_creds_gen(t), __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->tmu);
    tls_creds_unref(old);
    return AS_OK;
}

/* See http.h. */
uint16_t http_server_port(const http_server *s)
{
    return s ? s->port : 0;
}

/* See http.h. */
unsigned http_server_threads(const http_server *s)
{
    return s ? s->threads : 0;
}
