/*
 * mux.h - the call loop, the transport of pod patches (status conditions,
 * GPU device annotations; bindings keep their pool of HTTP/1.1 handles,
 * bind.h, and Events their poster thread, events.h, which measured
 * cheaper per call end to end): one event-loop thread driving
 * a libcurl multi handle, so that many requests share few connections.
 * Over TLS the loop negotiates HTTP/2 (ALPN) and multiplexes every call
 * as a stream of one connection; over plain http it keeps a pool of
 * HTTP/1.1 keep-alive connections (at most cfg.bind_concurrency). Submitting a call costs the
 * caller a queue push and, only when the loop sleeps, one wake-up; the loop then sends every queued
 * call and reads every answer per wake-up, so under load many calls share one system call, one TLS
 * record and one context switch.
 *
 * A call (k8s_call) is filled by the caller, handed over with
 * k8s_mux_submit (asynchronous: its done callback runs on the loop
 * thread) or k8s_mux_do (the calling thread waits for the answer). The
 * call's settings are those of transport.h's requests: the client's
 * TLS, auth and headers, rate limiting (a limited call takes a token of
 * the client's limiter before it goes out, waiting in the loop, not in
 * the caller), the request timeout.
 *
 * The loop starts with the client's first call and stops with the
 * client: k8s_mux_stop fails every call not yet answered (cc
 * CURLE_ABORTED_BY_CALLBACK) through its callback, then joins the
 * thread. Idle, the loop sleeps in poll with an hour's timeout: only a
 * submission or stop wakes it.
 */
#ifndef AGENTSCHED_K8S_MUX_H
#define AGENTSCHED_K8S_MUX_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/error.h"
#include "agentsched/k8s/transport.h"

typedef struct k8s_mux k8s_mux;
typedef struct k8s_call k8s_call;

/* Completion of a submitted call, on the loop thread: must not block
 * (it may submit further calls). */
typedef void (*k8s_call_fn)(k8s_call *c);

struct k8s_call {
    /* in (the strings and body are borrowed until completion) */
    const char *method; /* "POST", "PATCH", "GET", ... */
    const char *path;   /* starts with "/" */
    const char *body;   /* may be NULL */
    size_t body_len;
    const char *content_type; /* NULL: application/json when body is set */
    buf *resp;                /* may be NULL: the answer's body is dropped */
    bool cut;                 /* an answer over resp's cap is cut there, not a failure */
    bool limited;             /* takes a token of the client's limiter */
    uint64_t not_before_ns;   /* 0, or a monotonic time before which it is not sent */
    k8s_call_fn done;         /* NULL for k8s_mux_do */
    void *arg;
    /* out */
    CURLcode cc;            /* CURLE_OK when an HTTP answer arrived */
    long status;            /* its status (0 without one) */
    int64_t retry_after_ms; /* a 429/503 Retry-After in seconds form, in ms; 0: none */
    unsigned sends;         /* times the request went out on a connection */
    bool overflow;          /* the answer did not fit resp (the call failed) */
    bool cut_short;         /* with cut: resp holds only the answer's first cap bytes */
    long http_version;      /* CURL_HTTP_VERSION_2_0, _1_1, ... (0 without an answer) */
    /* the loop's */
    k8s_call *next, *prev;
    CURL *h;
    struct curl_slist *hdrs;
    char *url;
    void *waiter;
};

/* k8s_mux_new makes the loop of client k (not started). AS_ENOMEM. */
as_err k8s_mux_new(k8s_client *k, k8s_mux **out);

/* k8s_mux_submit hands c to the loop (starting it on first use); c's done
 * runs on the loop thread once it is answered or has failed. After stop,
 * done runs at once on the caller with cc CURLE_ABORTED_BY_CALLBACK. */
void k8s_mux_submit(k8s_mux *m, k8s_call *c);

/*
 * k8s_mux_do submits c and waits for its outcome; c->done is ignored.
 * Returns AS_OK whenever an HTTP answer arrived (c->status),
 * AS_ETOOBIG when it overflowed c->resp, AS_ETIMEOUT, or AS_EIO with diag
 * naming method, path and libcurl's reason (stopping included).
 */
as_err k8s_mux_do(k8s_mux *m, k8s_call *c, as_diag *diag);

/* k8s_mux_stop fails every pending call through its callback and joins the
 * loop (the client's stop flag must be up). Idempotent. */
void k8s_mux_stop(k8s_mux *m);

/* k8s_mux_free stops and frees. NULL ok. */
void k8s_mux_free(k8s_mux *m);

/*
 * k8s_mux_patch sends PATCH path with the given Content-Type (e.g.
 * "application/merge-patch+json") through the client's call loop, rate-limited,
 * like k8s_request (same return contract: AS_OK whenever a response
 * arrived; check *status). retry_after_ms (may be NULL) gets a 429/503
 * answer's Retry-After in ms (seconds form), else 0. resp keeps at most its
 * cap of the answer and the rest is dropped, the call still succeeding: a
 * patch that succeeds answers with the whole object (up to etcd's 1.5 MiB),
 * which no caller reads, and an error's Status is short.
 */
as_err k8s_mux_patch(k8s_client *k, const char *path, const char *content_type, const char *body,
                     size_t body_len, buf *resp, long *status, int64_t *retry_after_ms,
                     as_diag *diag);

#endif
