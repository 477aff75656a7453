/* mux.c - see mux.h: one libcurl multi handle driven by one thread, calls
 * handed over through a mutex-guarded list and, when the loop sleeps,
 * curl_multi_wakeup. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/mux.h"
#include "internal.h"

/* The longest an idle loop sleeps when nothing is in flight: submissions
 * and stop wake it, so this only bounds a lost wake-up. */
#define IDLE_POLL_MS 3600000
/* With transfers in flight and no libcurl timer, the loop still looks at
 * least this often (the stop flag, a due delayed call). */
#define BUSY_POLL_MS 1000
#define CT_PREFIX    "Content-Type: "

struct k8s_mux {
    k8s_client *k;
    CURLM *multi;
    pthread_mutex_t mu;
    k8s_call *in_head, *in_tail; /* submitted, not yet seen by the loop */
    bool polling;                /* the loop is (about to be) in curl_multi_poll */
    bool woken;                  /* a wake-up was sent for this poll */
    bool started, stopped;
    pthread_t thread;
    /* the loop thread's own */
    k8s_call *delayed; /* by not_before_ns */
    k8s_call *flying;  /* added to the multi handle (doubly linked) */
    CURL **pool;       /* idle easy handles */
    size_t npool, pool_cap;
};

static size_t call_sink(char *ptr, size_t size, size_t nmemb, void *ud)
{
    k8s_call *c = ud;
    size_t n = size * nmemb;
    if (!c->resp)
        return n;
    if (c->cut_short)
        return n;
    if (c->cut && n > c->resp->cap - c->resp->len) {
        /* keep what fits, drop the rest and let the transfer finish */
        (void)buf_append(c->resp, ptr, c->resp->cap - c->resp->len);
        c->cut_short = true;
        return n;
    }
    if (buf_append(c->resp, ptr, n) != AS_OK) {
        c->overflow = true;
        return 0;
    }
    return n;
}

/* libcurl calls this right before the request goes out on a connection,
 * its own silent re-send on a fresh connection included. */
static int call_sent(void *ud, char *ip, char *local_ip, int port, int local_port)
{
    ((k8s_call *)ud)->sends++;
    return CURL_PREREQFUNC_OK;
}

/* complete hands c its outcome: the waiter is posted or done runs. */
static void complete(k8s_call *c, CURLcode cc)
{
    c->cc = cc;
    c->next = c->prev = NULL;
    if (c->waiter)
        sem_post(c->waiter); /* c may be gone from here on */
    else if (c->done)
        c->done(c);
}

static void handle_put(k8s_mux *m, CURL *h)
{
    if (m->npool < m->pool_cap) {
        curl_easy_reset(h);
        m->pool[m->npool++] = h;
    } else {
        curl_easy_cleanup(h);
    }
}

/* finish takes a transfer off the multi handle, reads its answer and
 * completes it. */
static void finish(k8s_mux *m, k8s_call *c, CURLcode cc)
{
    CURL *h = c->h;
    if (c->prev)
        c->prev->next = c->next;
    else
        m->flying = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (cc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->status);
        curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &c->http_version);
        if (c->status == 401)
            k8s_token_invalidate(m->k);
        struct curl_header *ra = NULL;
        if ((c->status == 429 || c->status == 503) &&
            curl_easy_header(h, "Retry-After", 0, CURLH_HEADER, -1, &ra) == CURLHE_OK && ra &&
            ra->value) {
            long sec = strtol(ra->value, NULL, 10); /* seconds; HTTP dates are ignored */
            if (sec > 0)
                c->retry_after_ms = (int64_t)sec * 1000;
        }
    }
    curl_multi_remove_handle(m->multi, h);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    handle_put(m, h);
    curl_slist_free_all(c->hdrs);
    free(c->url);
    c->h = NULL;
    c->hdrs = NULL;
    c->url = NULL;
    complete(c, cc);
}

/* launch prepares an easy handle for c and adds it to the multi handle;
 * a call that cannot be prepared completes with CURLE_OUT_OF_MEMORY. */
static void launch(k8s_mux *m, k8s_call *c)
{
    k8s_client *k = m->k;
    CURL *h = m->npool ? m->pool[--m->npool] : curl_easy_init();
    struct curl_slist *hdrs = NULL, *t;
    char *url = h ? k8s_url(k, c->path) : NULL;
    if (!url || k8s_easy_prepare(k, h, url, c->body && !c->content_type, &hdrs))
        goto oom;
    if (c->content_type) {
        size_t n = strlen(c->content_type);
        char ct[sizeof CT_PREFIX + 128];
        if (n > 128)
            goto oom;
        memcpy(ct, CT_PREFIX, sizeof CT_PREFIX - 1);
        memcpy(ct + sizeof CT_PREFIX - 1, c->content_type, n + 1);
        if (!(t = curl_slist_append(hdrs, ct)))
            goto oom;
        hdrs = t;
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    }
    /* h2 over TLS (ALPN), every call a stream of one connection; libcurl
     * waits for the connection's protocol instead of opening more. */
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(h, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, call_sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, call_sent);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, c);
    curl_easy_setopt(h, CURLOPT_PRIVATE, c);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)k->cfg.request_timeout_ms);
    if (c->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)c->body_len);
    }
    if (strcmp(c->method, "GET") != 0 && strcmp(c->method, "POST") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
    else if (!strcmp(c->method, "POST") && !c->body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    }
    c->h = h;
    c->hdrs = hdrs;
    c->url = url;
    if (curl_multi_add_handle(m->multi, h) != CURLM_OK) {
        c->h = NULL;
        c->hdrs = NULL;
        c->url = NULL;
        goto oom;
    }
    c->prev = NULL;
    c->next = m->flying;
    if (m->flying)
        m->flying->prev = c;
    m->flying = c;
    return;
oom:
    if (h) {
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
        handle_put(m, h);
    }
    curl_slist_free_all(hdrs);
    free(url);
    complete(c, CURLE_OUT_OF_MEMORY);
}

static void delay(k8s_mux *m, k8s_call *c)
{
    k8s_call **pp = &m->delayed;
    while (*pp && (*pp)->not_before_ns <= c->not_before_ns)
        pp = &(*pp)->next;
    c->next = *pp;
    *pp = c;
}

static void fail_list(k8s_call *c)
{
    while (c) {
        k8s_call *n = c->next;
        complete(c, CURLE_ABORTED_BY_CALLBACK);
        c = n;
    }
}

static void *mux_main(void *arg)
{
    k8s_mux *m = arg;
    k8s_client *k = m->k;
    pthread_setname_np(pthread_self(), "as-k8s-mux");
    for (;;) {
        pthread_mutex_lock(&m->mu);
        k8s_call *in = m->in_head;
        m->in_head = m->in_tail = NULL;
        bool stop = m->stopped || k8s_stopping(k);
        if (stop)
            m->stopped = true; /* later submissions fail at once */
        pthread_mutex_unlock(&m->mu);
        if (stop) {
            fail_list(in);
            break;
        }
        uint64_t now = clock_mono_ns();
        while (in) {
            k8s_call *c = in;
            in = c->next;
            if (c->limited) {
                int64_t wait = k8s_rl_debit_ns(&k->rl);
                if (wait > 0 && c->not_before_ns < now + (uint64_t)wait)
                    c->not_before_ns = now + (uint64_t)wait;
            }
            if (c->not_before_ns > now)
                delay(m, c);
            else
                launch(m, c);
        }
        while (m->delayed && m->delayed->not_before_ns <= now) {
            k8s_call *c = m->delayed;
            m->delayed = c->next;
            launch(m, c);
        }
        int running = 0;
        curl_multi_perform(m->multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m->multi, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            k8s_call *c = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
            if (c)
                finish(m, c, msg->data.result);
        }
        long to = -1;
        curl_multi_timeout(m->multi, &to);
        if (to < 0)
            to = m->flying ? BUSY_POLL_MS : IDLE_POLL_MS;
        if (m->delayed) {
            uint64_t t = clock_mono_ns();
            int64_t d = m->delayed->not_before_ns > t
                            ? (int64_t)((m->delayed->not_before_ns - t) / 1000000u) + 1
                            : 0;
            if (d < to)
                to = d;
        }
        if (to == 0)
            continue;
        pthread_mutex_lock(&m->mu);
        bool sleep = !m->in_head && !m->stopped;
        if (sleep) {
            m->polling = true;
            m->woken = false;
        }
        pthread_mutex_unlock(&m->mu);
        if (!sleep)
            continue;
        curl_multi_poll(m->multi, NULL, 0, (int)to, NULL);
        pthread_mutex_lock(&m->mu);
        m->polling = false;
        pthread_mutex_unlock(&m->mu);
    }
    /* Stopping: nothing in flight is answered any more. */
    while (m->flying)
        finish(m, m->flying, CURLE_ABORTED_BY_CALLBACK);
    fail_list(m->delayed);
    m->delayed = NULL;
    return NULL;
}

/* See mux.h. */
as_err k8s_mux_new(k8s_client *k, k8s_mux **out)
{
    *out = NULL;
    k8s_mux *m = calloc(1, sizeof *m);
    if (!m)
        return AS_ENOMEM;
    m->k = k;
    pthread_mutex_init(&m->mu, NULL);
    m->pool_cap = 256;
    m->pool = calloc(m->pool_cap, sizeof *m->pool);
    m->multi = curl_multi_init();
    if (!m->pool || !m->multi) {
        k8s_mux_free(m);
        return AS_ENOMEM;
    }
    curl_multi_setopt(m->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    /* h2 needs one connection; plain http as many as binds may run. */
    long conns = k->cfg.bind_concurrency > 0 ? (long)k->cfg.bind_concurrency : 32;
    curl_multi_setopt(m->multi, CURLMOPT_MAX_HOST_CONNECTIONS, conns);
    curl_multi_setopt(m->multi, CURLMOPT_MAXCONNECTS, conns);
    *out = m;
    return AS_OK;
}

/* See mux.h. */
void k8s_mux_submit(k8s_mux *m, k8s_call *c)
{
    c->next = c->prev = NULL;
    c->h = NULL;
    c->hdrs = NULL;
    c->url = NULL;
    c->cc = CURLE_OK;
    c->status = 0;
    c->retry_after_ms = 0;
    c->sends = 0;
    c->overflow = false;
    c->cut_short = false;
    c->http_version = 0;
    pthread_mutex_lock(&m->mu);
    if (!m->stopped && !m->started) {
        if (pthread_create(&m->thread, NULL, mux_main, m) == 0)
            m->started = true;
        else
            log_error("msg=\"cannot start the API call loop\"");
    }
    if (m->stopped || !m->started) {
        pthread_mutex_unlock(&m->mu);
        complete(c, CURLE_ABORTED_BY_CALLBACK);
        return;
    }
    if (m->in_tail)
        m->in_tail->next = c;
    else
        m->in_head = c;
    m->in_tail = c;
    bool wake = m->polling && !m->woken;
    if (wake)
        m->woken = true;
    pthread_mutex_unlock(&m->mu);
    if (wake)
        curl_multi_wakeup(m->multi);
}

/* See mux.h. */
as_err k8s_mux_do(k8s_mux *m, k8s_call *c, as_diag *diag)
{
    sem_t s;
    sem_init(&s, 0, 0);
    c->waiter = &s;
    k8s_mux_submit(m, c);
    while (sem_wait(&s) != 0 && errno == EINTR)
        ;
    sem_destroy(&s);
    c->waiter = NULL;
    if (c->cc == CURLE_OK)
        return AS_OK;
    if (c->overflow)
        return as_diag_set(diag, AS_ETOOBIG, NULL, "%s %s: response larger than %zu bytes",
                           c->method, c->path, c->resp ? c->resp->cap : 0);
    if (c->cc == CURLE_OPERATION_TIMEDOUT)
        return as_diag_set(diag, AS_ETIMEOUT, NULL, "%s %s: timed out", c->method, c->path);
    if (c->cc == CURLE_ABORTED_BY_CALLBACK)
        return as_diag_set(diag, AS_EIO, NULL, "%s %s: client stopping", c->method, c->path);
    return as_diag_set(diag, AS_EIO, NULL, "%s %s%s: %s", c->method, m->k->conn->server, c->path,
                       curl_easy_strerror(c->cc));
}

/* See mux.h. */
void k8s_mux_stop(k8s_mux *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    bool was = m->stopped, started = m->started;
    m->stopped = true;
    pthread_mutex_unlock(&m->mu);
    if (was)
        return;
    if (started) {
        curl_multi_wakeup(m->multi);
        pthread_join(m->thread, NULL);
    }
}

/* See mux.h. */
void k8s_mux_free(k8s_mux *m)
{
    if (!m)
        return;
    k8s_mux_stop(m);
    for (size_t i = 0; i < m->npool; i++)
        curl_easy_cleanup(m->pool[i]);
    free(m->pool);
    if (m->multi)
        curl_multi_cleanup(m->multi);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* See mux.h. */
as_err k8s_mux_patch(k8s_client *k, const char *path, const char *content_type, const char *body,
                     size_t body_len, buf *resp, long *status, int64_t *retry_after_ms,
                     as_diag *diag)
{
    *status = 0;
    if (retry_after_ms)
        *retry_after_ms = 0;
    k8s_call c = {.method = "PATCH",
                  .path = path,
                  .body = body,
                  .body_len = body_len,
                  .content_type = content_type,
                  .resp = resp,
                  .cut = true,
                  .limited = true};
    as_err err = k8s_mux_do(k->mux, &c, diag);
    *status = c.status;
    if (retry_after_ms)
        *retry_after_ms = c.retry_after_ms;
    return err;
}
