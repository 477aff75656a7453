/* transport.c - see transport.h: auth, TLS, rate limiting, request
 * execution, the stop flag and the status counters. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/hash.h"
#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/kubeconfig.h"
#include "agentsched/k8s/transport.h"
#include "internal.h"

#define TOKEN_CAP        (64 * 1024)
#define TOKEN_RECHECK_NS (1000000000ull)

/* See transport.h. */
bool k8s_stopping(k8s_client *k)
{
    return __atomic_load_n(&k->stop, __ATOMIC_ACQUIRE) != 0;
}

/* See transport.h. */
bool k8s_sleep_ms(k8s_client *k, int64_t ms)
{
    if (ms <= 0)
        return !k8s_stopping(k);
    struct timespec ts = clock_deadline_ms(ms);
    pthread_mutex_lock(&k->mu);
    while (!k8s_stopping(k)) {
        if (pthread_cond_timedwait(&k->cond, &k->mu, &ts) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&k->mu);
    return !k8s_stopping(k);
}

/* See transport.h. */
int64_t k8s_backoff_ms(int64_t initial, int64_t max, unsigned attempt, uint64_t *rng)
{
    int64_t d = initial > 0 ? initial : 1;
    for (unsigned i = 0; i < attempt && d < max; i++)
        d *= 2;
    if (d > max)
        d = max;
    /* xorshift64: per-caller state, no global RNG. Jitter in [d/2, d]. */
    uint64_t x = *rng ? *rng : 0x9E3779B97F4A7C15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    return d / 2 + (int64_t)(x % (uint64_t)(d / 2 + 1));
}

/* ---- rate limiter ---------------------------------------------------- */

/* See transport.h. */
void k8s_rl_init(k8s_ratelimit *rl, double qps, double burst)
{
    pthread_mutex_init(&rl->mu, NULL);
    rl->qps = qps;
    rl->burst = burst;
    rl->tokens = burst;
    rl->last_ns = clock_mono_ns();
}

/* rl_refill adds the tokens earned since the last call, up to the burst.
 * rl->mu held. */
static void rl_refill(k8s_ratelimit *rl)
{
    uint64_t now = clock_mono_ns();
    rl->tokens += (double)(now - rl->last_ns) / 1e9 * rl->qps;
    rl->last_ns = now;
    if (rl->tokens > rl->burst)
        rl->tokens = rl->burst;
}

/* See transport.h. */
bool k8s_rl_take(k8s_ratelimit *rl)
{
    if (rl->qps <= 0)
        return true;
    pthread_mutex_lock(&rl->mu);
    rl_refill(rl);
    bool ok = rl->tokens >= 1;
    if (ok)
        rl->tokens -= 1;
    pthread_mutex_unlock(&rl->mu);
    return ok;
}

/* See transport.h. */
int64_t k8s_rl_debit_ns(k8s_ratelimit *rl)
{
    if (rl->qps <= 0)
        return 0;
    pthread_mutex_lock(&rl->mu);
    rl_refill(rl);
    rl->tokens -= 1;
    double wait_s = rl->tokens < 0 ? -rl->tokens / rl->qps : 0;
    pthread_mutex_unlock(&rl->mu);
    return (int64_t)(wait_s * 1e9);
}

/* See transport.h. */
bool k8s_rl_wait(k8s_client *k)
{
    k8s_ratelimit *rl = &k->rl;
    if (rl->qps <= 0)
        return !k8s_stopping(k);
    pthread_mutex_lock(&rl->mu);
    rl_refill(rl);
    rl->tokens -= 1;
    double wait_s = rl->tokens < 0 ? -rl->tokens / rl->qps : 0;
    pthread_mutex_unlock(&rl->mu);
    if (wait_s > 0)
        return k8s_sleep_ms(k, (int64_t)(wait_s * 1000) + 1);
    return !k8s_stopping(k);
}

/* ---- tokens ---------------------------------------------------------- */

static char *read_token_file(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    if (doc_read_file(path, TOKEN_CAP, &data, &len, NULL) != AS_OK)
        return NULL;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' ' ||
                       data[len - 1] == '\t'))
        data[--len] = 0;
    if (len == 0 || memchr(data, '\n', len)) { /* not a single-line token */
        free(data);
        return NULL;
    }
    return data;
}

/* See transport.h. */
void k8s_token_invalidate(k8s_client *k)
{
    pthread_mutex_lock(&k->tok_mu);
    k->tok_checked_ns = 0;
    k->tok_mtime.tv_sec = 0;
    k->tok_mtime.tv_nsec = 0;
    pthread_mutex_unlock(&k->tok_mu);
}

/* Re-reads a token file at most once a second when its inode, size or
 * mtime changed (kubelet rotates projected service-account tokens by
 * replacing them); tok_mu held. */
static void token_refresh_locked(k8s_client *k)
{
    if (k->conn->token_file) {
        uint64_t now = clock_mono_ns();
        if (!k->token || now - k->tok_checked_ns >= TOKEN_RECHECK_NS || k->tok_checked_ns == 0) {
            k->tok_checked_ns = now;
            struct stat st;
            if (stat(k->conn->token_file, &st) == 0 &&
                (st.st_mtim.tv_sec != k->tok_mtime.tv_sec ||
                 st.st_mtim.tv_nsec != k->tok_mtime.tv_nsec || st.st_size != k->tok_size ||
                 st.st_ino != k->tok_ino || !k->token)) {
                char *t = read_token_file(k->conn->token_file);
                if (t) {
                    free(k->token);
                    k->token = t;
                    k->tok_gen++;
                    k->tok_mtime = st.st_mtim;
                    k->tok_size = st.st_size;
                    k->tok_ino = st.st_ino;
                    log_debug("msg=\"k8s token reloaded\" file=%s", k->conn->token_file);
                } else if (!k->token) {
                    log_warn("msg=\"cannot read token file\" file=%s", k->conn->token_file);
                }
            }
        }
    }
}

/* Copies the current bearer token into out (empty when none). */
static void current_token(k8s_client *k, char *out, size_t outlen)
{
    out[0] = 0;
    pthread_mutex_lock(&k->tok_mu);
    token_refresh_locked(k);
    if (k->token)
        snprintf(out, outlen, "%s", k->token);
    pthread_mutex_unlock(&k->tok_mu);
}

/* ---- requests -------------------------------------------------------- */

/* See transport.h. */
as_err k8s_path_segment(buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    if (buf_reserve(b, n * 3) != AS_OK)
        return b->err;
    char *o = b->data + b->len;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~') {
            *o++ = (char)ch;
        } else {
            *o++ = '%';
            *o++ = hex[ch >> 4];
            *o++ = hex[ch & 15];
        }
    }
    b->len = (size_t)(o - b->data);
    b->data[b->len] = 0;
    return AS_OK;
}

/* See transport.h. */
char *k8s_url(k8s_client *k, const char *path)
{
    size_t nb = strlen(k->url_base), np = strlen(path);
    char *u = malloc(nb + np + 1);
    if (u) {
        memcpy(u, k->url_base, nb);
        memcpy(u + nb, path, np + 1);
    }
    return u;
}

/* easy_options sets what every request of this client shares: the
 * connection (TLS, timeouts, HTTP version) and the credentials but the
 * bearer token. */
static void easy_options(k8s_client *k, CURL *h)
{
    const k8s_conn *c = k->conn;
    if (k->connect_to)
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, k->connect_to);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* HTTP/1.1, not the h2 libcurl would negotiate: every handle keeps its
     * own connection (no share handle), so h2's multiplexing buys nothing,
     * while its framing and HPACK cost CPU on both ends. Measured on the
     * bench_e2e extender mode (1000 nodes, 5000 pods, alternating runs):
     * agentsched 10.4 and 10.8 CPU-s against 11.6 and 12.9 with h2, pods/s
     * 99 and 94 against 100 and 87. The call loop (mux.h) is where h2
     * multiplexes: it sets its own version over this one. */
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)k->cfg.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, NULL);
    if (c->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (c->ca_data.data) {
        struct curl_blob b = {c->ca_data.data, c->ca_data.len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    } else if (c->ca_file) {
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    }
    if (c->cert_data.data) {
        struct curl_blob b = {c->cert_data.data, c->cert_data.len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    } else if (c->cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
    }
    if (c->key_data.data) {
        struct curl_blob b = {c->key_data.data, c->key_data.len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (c->key_file) {
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
    }
    if (c->username) {
        curl_easy_setopt(h, CURLOPT_USERNAME, c->username);
        curl_easy_setopt(h, CURLOPT_PASSWORD, c->password ? c->password : "");
    }
}

/* build_headers makes the request headers for bearer token tok ("" or
 * NULL: none) into *out. AS_ENOMEM. */
static as_err build_headers(const char *tok, bool json_body, struct curl_slist **out)
{
    struct curl_slist *l = NULL, *t;
    *out = NULL;
    if (tok && tok[0]) {
        static const char pre[] = "Authorization: Bearer ";
        size_t n = strlen(tok);
        char *hb = malloc(sizeof pre + n);
        if (!hb)
            goto oom;
        memcpy(hb, pre, sizeof pre - 1);
        memcpy(hb + sizeof pre - 1, tok, n + 1);
        t = curl_slist_append(l, hb);
        free(hb);
        if (!t)
            goto oom;
        l = t;
    }
    if (!(t = curl_slist_append(l, "Accept: application/json")))
        goto oom;
    l = t;
    if (!(t = curl_slist_append(l, "User-Agent: agentsched/" AGENTSCHED_VERSION)))
        goto oom;
    l = t;
    if (json_body) {
        if (!(t = curl_slist_append(l, "Content-Type: application/json")))
            goto oom;
        l = t;
    }
    *out = l;
    return AS_OK;
oom:
    curl_slist_free_all(l);
    return AS_ENOMEM;
}

/* See transport.h. */
as_err k8s_easy_prepare(k8s_client *k, CURL *h, const char *url, bool json_body,
                        struct curl_slist **hdrs)
{
    *hdrs = NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    easy_options(k, h);
    char tok[TOKEN_CAP];
    current_token(k, tok, sizeof tok);
    as_err err = build_headers(tok, json_body, hdrs);
    if (!err)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    return err;
}

typedef struct body_sink {
    buf *b;
    bool overflow;
} body_sink;

static size_t sink_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    body_sink *s = ud;
    size_t n = size * nmemb;
    if (!s->b)
        return n;
    if (buf_append(s->b, ptr, n) != AS_OK) {
        s->overflow = true;
        return 0;
    }
    return n;
}

static int stop_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    return k8s_stopping(ud) ? 1 : 0;
}

static as_err do_request(k8s_client *k, CURL *h, k8s_kept *kh, const char *method, const char *path,
                         const char *body, size_t body_len, buf *resp, long *status,
                         int64_t *retry_after_ms, unsigned *sends, bool limited, int64_t timeout_ms,
                         as_diag *diag);

/* See transport.h. */
as_err k8s_do(k8s_client *k, CURL *h, const char *method, const char *path, const char *body,
              size_t body_len, buf *resp, long *status, as_diag *diag)
{
    return do_request(k, h, NULL, method, path, body, body_len, resp, status, NULL, NULL, true,
                      k->cfg.request_timeout_ms, diag);
}

/* See transport.h. */
as_err k8s_do_ex(k8s_client *k, CURL *h, const char *method, const char *path, const char *body,
                 size_t body_len, buf *resp, long *status, int64_t *retry_after_ms, unsigned *sends,
                 as_diag *diag)
{
    return do_request(k, h, NULL, method, path, body, body_len, resp, status, retry_after_ms, sends,
                      true, k->cfg.request_timeout_ms, diag);
}

/* See transport.h. */
as_err k8s_do_priority(k8s_client *k, CURL *h, const char *method, const char *path,
                       const char *body, size_t body_len, buf *resp, long *status,
                       int64_t timeout_ms, as_diag *diag)
{
    return do_request(k, h, NULL, method, path, body, body_len, resp, status, NULL, NULL, false,
                      timeout_ms, diag);
}

/* See transport.h. */
as_err k8s_do_kept(k8s_client *k, k8s_kept *kh, const char *path, const char *body, size_t body_len,
                   buf *resp, long *status, int64_t *retry_after_ms, unsigned *sends, as_diag *diag)
{
    return do_request(k, kh->h, kh, "POST", path, body, body_len, resp, status, retry_after_ms,
                      sends, true, k->cfg.request_timeout_ms, diag);
}

/* See transport.h. */
as_err k8s_do_kept_try(k8s_client *k, k8s_kept *kh, const char *path, const char *body,
                       size_t body_len, buf *resp, long *status, int64_t *retry_after_ms,
                       unsigned *sends, int64_t timeout_ms, as_diag *diag)
{
    if (!k8s_rl_take(&k->rl)) {
        *status = 0;
        if (sends)
            *sends = 0;
        return as_diag_set(diag, AS_EAGAIN, NULL, "POST %s: over --kube-api-qps", path);
    }
    return do_request(k, kh->h, kh, "POST", path, body, body_len, resp, status, retry_after_ms,
                      sends, false, timeout_ms, diag);
}

/* See transport.h. */
as_err k8s_kept_init(k8s_kept *kh, size_t resp_cap)
{
    memset(kh, 0, sizeof *kh);
    buf_init(&kh->path, 4096);
    buf_init(&kh->body, 64 * 1024);
    buf_init(&kh->resp, resp_cap);
    /* the wire's headers (a bearer token is a few KiB at most) and its
     * request: the line with the path, the headers, the body */
    buf_init(&kh->head, 16 * 1024);
    buf_init(&kh->out, 4096 + 16 * 1024 + 64 * 1024 + 64);
    k8s_wire_init(&kh->wire, resp_cap);
    kh->h = curl_easy_init();
    return kh->h ? AS_OK : AS_ENOMEM;
}

/* See transport.h. */
void k8s_kept_fini(k8s_kept *kh)
{
    k8s_wire_free(&kh->wire);
    if (kh->h)
        curl_easy_cleanup(kh->h);
    curl_slist_free_all(kh->hdrs);
    buf_free(&kh->head);
    buf_free(&kh->out);
    buf_free(&kh->path);
    buf_free(&kh->body);
    buf_free(&kh->resp);
    memset(kh, 0, sizeof *kh);
}

/* libcurl calls this right before each request goes out on a connection,
 * its own silent re-send included (see k8s_do_ex). */
static int count_send(void *ud, char *ip, char *local_ip, int port, int local_port)
{
    (*(unsigned *)ud)++;
    return CURL_PREREQFUNC_OK;
}

/* transfer_options sets how a request's transfer runs: the answer into a
 * body_sink, the timeout, stop aborting it (limited: priority requests are
 * short anyway, and the lease's release must still go out while
 * stopping), and with counting the sends counted (count_send). */
static void transfer_options(k8s_client *k, CURL *h, bool limited, int64_t timeout_ms,
                             bool counting)
{
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
    if (limited) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, stop_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, k);
    }
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    if (counting)
        curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, count_send);
}

/* wire_head appends to b what follows a request's path on the wire, as
 * libcurl sends it: the protocol, Host first, then hdrs, each line ended
 * (the blank line and any Content-Length are the caller's). */
static void wire_head(const k8s_client *k, const struct curl_slist *hdrs, buf *b)
{
    buf_puts(b, " HTTP/1.1\r\nHost: ");
    buf_puts(b, k->wire_host);
    buf_puts(b, "\r\n");
    for (const struct curl_slist *e = hdrs; e; e = e->next) {
        buf_puts(b, e->data);
        buf_puts(b, "\r\n");
    }
}

/* kept_setup makes kept's handle ready for a JSON POST: on first use the
 * client's options and the ones every kept request shares; the headers
 * again whenever the bearer token changed. AS_ENOMEM. */
static as_err kept_setup(k8s_client *k, k8s_kept *kh)
{
    CURL *h = kh->h;
    if (!kh->set) {
        curl_easy_reset(h);
        easy_options(k, h);
        transfer_options(k, h, true, k->cfg.request_timeout_ms, true);
        kh->set = true;
    }
    as_err err = AS_OK;
    pthread_mutex_lock(&k->tok_mu);
    token_refresh_locked(k);
    if (!kh->hdrs || kh->tok_gen != k->tok_gen) {
        struct curl_slist *l = NULL;
        if (!(err = build_headers(k->token, true, &l))) {
            curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
            curl_slist_free_all(kh->hdrs);
            kh->hdrs = l;
            kh->tok_gen = k->tok_gen;
            /* the wire's copy of the same headers, Host first as libcurl
             * sends it */
            buf_reset(&kh->head);
            if (k->wire_host) {
                wire_head(k, l, &kh->head);
                buf_puts(&kh->head, "Content-Length: ");
                if (kh->head.err)
                    err = kh->head.err;
            }
        }
    }
    pthread_mutex_unlock(&k->tok_mu);
    return err;
}

static bool wire_stop(void *arg)
{
    return k8s_stopping(arg);
}

/* kept_frame writes the request (method "POST" with the JSON body, or
 * "GET" with none) of path into kh->out, as it goes on the wire
 * (kept_setup done), after what kh->out holds; too large for kh->out's
 * cap, kh->out is left as it was (AS_ETOOBIG). */
static as_err kept_frame(k8s_client *k, k8s_kept *kh, const char *method, const char *path,
                         const char *body, size_t body_len, as_diag *diag)
{
    buf *o = &kh->out;
    size_t at = o->len;
    buf_puts(o, method);
    buf_puts(o, " ");
    buf_puts(o, k->wire_prefix);
    buf_puts(o, path);
    buf_append(o, kh->head.data, kh->head.len);
    char num[24], *e = num + sizeof num;
    size_t n = body_len;
    do
        *--e = (char)('0' + n % 10);
    while (n /= 10);
    buf_append(o, e, (size_t)(num + sizeof num - e));
    buf_append(o, "\r\n\r\n", 4);
    if (body_len)
        buf_append(o, body, body_len);
    if (o->err) {
        as_err err = o->err;
        o->err = AS_OK;
        o->len = at;
        if (o->data)
            o->data[at] = '\0';
        return err == AS_ENOMEM
                   ? AS_ENOMEM
                   : as_diag_set(diag, AS_ETOOBIG, NULL, "%s %s: request too large", method, path);
    }
    return AS_OK;
}

/* kept_wire is do_request's request on kh's wire (kept_setup done):
 * method "POST" with the JSON body, or "GET" with none. */
static as_err kept_wire(k8s_client *k, k8s_kept *kh, const char *method, const char *path,
                        const char *body, size_t body_len, buf *resp, long *status,
                        int64_t *retry_after_ms, unsigned *sends, int64_t timeout_ms, as_diag *diag)
{
    buf_reset(&kh->out);
    kh->queued = 0;
    as_err ferr = kept_frame(k, kh, method, path, body, body_len, diag);
    if (ferr)
        return ferr;
    buf *o = &kh->out;
    k8s_wire_req rq = {o->data,   o->len, clock_mono_ns() + (uint64_t)timeout_ms * 1000000u,
                       wire_stop, k,      1};
    k8s_wire_ans ans;
    as_diag wd = {{0}, {0}};
    /* an answer nobody asked for lands in the handle's own scratch */
    as_err err = k8s_wire_do(&kh->wire, kh->h, &rq, resp ? resp : &kh->resp, &ans, &wd);
    kh->sent = ans.sent;
    if (sends)
        *sends = ans.sends;
    if (err)
        return as_diag_set(diag, err, NULL, "%s %s%s: %s", method, k->conn->server, path, wd.msg);
    *status = ans.status;
    if (ans.status == 401)
        k8s_token_invalidate(k);
    if (retry_after_ms && (ans.status == 429 || ans.status == 503))
        *retry_after_ms = ans.retry_after_ms;
    return AS_OK;
}

static as_err do_request(k8s_client *k, CURL *h, k8s_kept *kh, const char *method, const char *path,
                         const char *body, size_t body_len, buf *resp, long *status,
                         int64_t *retry_after_ms, unsigned *sends, bool limited, int64_t timeout_ms,
                         as_diag *diag)
{
    *status = 0;
    if (retry_after_ms)
        *retry_after_ms = 0;
    if (sends)
        *sends = 0;
    if (limited && !k8s_rl_wait(k))
        return as_diag_set(diag, AS_EIO, NULL, "client stopping");
    char *url = k8s_url(k, path);
    struct curl_slist *hdrs = NULL;
    unsigned no_sends = 0;
    body_sink sink = {resp, false};
    as_err err;
    if (!url)
        return AS_ENOMEM;
    if (kh) {
        /* a JSON POST on a handle whose options stay set (k8s_do_kept) */
        if ((err = kept_setup(k, kh)))
            goto done;
        curl_easy_setopt(h, CURLOPT_URL, url);
        if (k->wire_host && !kh->via_curl) {
            err = kept_wire(k, kh, "POST", path, body, body_len, resp, status, retry_after_ms,
                            sends, timeout_ms, diag);
            goto done;
        }
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
        curl_easy_setopt(h, CURLOPT_PREREQDATA, sends ? sends : &no_sends);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body_len);
    } else {
        curl_easy_reset(h); /* keeps the connection cache: keep-alive survives */
        if ((err = k8s_easy_prepare(k, h, url, body != NULL, &hdrs)))
            goto done;
        transfer_options(k, h, limited, timeout_ms, sends != NULL);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
        if (sends)
            curl_easy_setopt(h, CURLOPT_PREREQDATA, sends);
        if (body) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body_len);
        }
        if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        else if (!strcmp(method, "POST") && !body) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
        }
    }
    CURLcode cc = curl_easy_perform(h);
    if (kh) {
        long sent = 0;
        kh->sent = curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK && sent > 0
                       ? (size_t)sent
                       : 0;
    }
    if (cc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        if (*status == 401)
            k8s_token_invalidate(k);
        struct curl_header *ra = NULL;
        if (retry_after_ms && (*status == 429 || *status == 503) &&
            curl_easy_header(h, "Retry-After", 0, CURLH_HEADER, -1, &ra) == CURLHE_OK && ra &&
            ra->value) {
            long sec = strtol(ra->value, NULL, 10); /* seconds; HTTP dates are ignored */
            if (sec > 0)
                *retry_after_ms = (int64_t)sec * 1000;
        }
        err = AS_OK;
    } else if (sink.overflow) {
        err = as_diag_set(diag, AS_ETOOBIG, NULL, "%s %s: response larger than %zu bytes", method,
                          path, resp ? resp->cap : 0);
    } else if (cc == CURLE_OPERATION_TIMEDOUT) {
        err = as_diag_set(diag, AS_ETIMEOUT, NULL, "%s %s: timed out", method, path);
    } else {
        err = as_diag_set(diag, AS_EIO, NULL, "%s %s%s: %s", method, k->conn->server, path,
                          curl_easy_strerror(cc));
    }
done:
    if (!kh) {
        /* Headers are referenced by the handle only during the transfer;
         * a kept handle keeps its own. */
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
        curl_slist_free_all(hdrs);
    }
    free(url);
    return err;
}

/* kept_wire_ready is kept_setup for a request on kh's wire: on first use
 * also the URL a new connection's scheme, host and port are taken from
 * (set once, as the handle's options stay set and the wire writes each
 * request's path itself). AS_ENOMEM. */
static as_err kept_wire_ready(k8s_client *k, k8s_kept *kh, const char *path)
{
    bool fresh = !kh->set;
    as_err err = kept_setup(k, kh);
    if (!err && fresh) {
        char *url = k8s_url(k, path);
        if (!url) {
            kh->set = false; /* the next call sets the handle up again */
            return AS_ENOMEM;
        }
        curl_easy_setopt(kh->h, CURLOPT_URL, url);
        free(url);
    }
    return err;
}

/* See transport.h. */
as_err k8s_kept_get(k8s_client *k, k8s_kept *kh, const char *path, long *status, int64_t timeout_ms,
                    as_diag *diag)
{
    *status = 0;
    if (!k->wire_host || kh->via_curl)
        return AS_EUNSUPPORTED;
    assert(!kh->wire.pending && !kh->queued);
    as_err err = kept_wire_ready(k, kh, path);
    if (err)
        return err;
    return kept_wire(k, kh, "GET", path, NULL, 0, NULL, status, NULL, NULL, timeout_ms, diag);
}

/* See transport.h. */
as_err k8s_kept_post_add(k8s_client *k, k8s_kept *kh, const char *path, const char *body,
                         size_t body_len, as_diag *diag)
{
    if (!k->wire_host || kh->via_curl)
        return AS_EUNSUPPORTED;
    if (!kh->queued)
        buf_reset(&kh->out);
    as_err err = kept_wire_ready(k, kh, path);
    if (!err)
        err = kept_frame(k, kh, "POST", path, body, body_len, diag);
    if (err)
        return err;
    kh->queued++;
    return AS_OK;
}

/* See transport.h. */
uint64_t k8s_pod_key_hash(const char *ns, const char *name, const char *uid, const char *what)
{
    /* mixing between the parts keeps them in order */
    const uint64_t k1 = 0x9e3779b97f4a7c15ull;
    uint64_t key = hash_str(uid && *uid ? uid : name);
    key = hash_mix(key ^ hash_str(ns), k1);
    key = hash_mix(key ^ hash_str(what), k1);
    return key ? key : 1;
}

/* See transport.h. */
as_err k8s_get_stream_open(k8s_client *k, k8s_wire *w, CURL *proto, const char *path, long *status,
                           buf *errbody, as_diag *diag)
{
    *status = 0;
    if (!k->wire_host)
        return AS_EUNSUPPORTED;
    if (!k8s_rl_wait(k))
        return as_diag_set(diag, AS_EIO, NULL, "client stopping");
    char tok[TOKEN_CAP];
    current_token(k, tok, sizeof tok);
    struct curl_slist *hdrs = NULL;
    as_err err = build_headers(tok, false, &hdrs);
    if (err)
        return err;
    buf req;
    buf_init(&req, TOKEN_CAP + 8192);
    buf_puts(&req, "GET ");
    buf_puts(&req, k->wire_prefix);
    buf_puts(&req, path);
    wire_head(k, hdrs, &req);
    buf_puts(&req, "\r\n");
    curl_slist_free_all(hdrs);
    if (req.err) {
        err = as_diag_set(diag, req.err == AS_ENOMEM ? AS_ENOMEM : AS_ETOOBIG, NULL,
                          "GET %s: request too large", path);
        goto done;
    }
    k8s_wire_req rq = {
        req.data,  req.len, clock_mono_ns() + (uint64_t)k->cfg.request_timeout_ms * 1000000u,
        wire_stop, k,       1};
    as_diag wd = {{0}, {0}};
    err = k8s_wire_stream_open(w, proto, &rq, status, errbody, &wd);
    if (err)
        err = as_diag_set(diag, err, NULL, "GET %s%s: %s", k->conn->server, path, wd.msg);
done:
    buf_free(&req);
    return err;
}

/* See transport.h. */
as_err k8s_get_stream_read(k8s_client *k, k8s_wire *w, int64_t timeout_ms, k8s_wire_sink sink,
                           void *arg, bool *end, as_diag *diag)
{
    k8s_wire_req rq = {NULL, 0, clock_mono_ns() + (uint64_t)timeout_ms * 1000000u, wire_stop, k, 1};
    return k8s_wire_stream_read(w, &rq, sink, arg, end, diag);
}

/* See transport.h. */
as_err k8s_kept_post_flush(k8s_client *k, k8s_kept *kh, bool wait, as_diag *diag)
{
    unsigned n = kh->queued;
    if (!n)
        return AS_OK;
    /* one token a request, as each is a write the API server makes */
    for (unsigned i = 0; i < n; i++) {
        if (!wait && !k8s_rl_take(&k->rl))
            return as_diag_set(diag, AS_EAGAIN, NULL, "POST not sent: over --kube-api-qps");
        if (wait && !k8s_rl_wait(k)) {
            kh->queued = 0;
            return as_diag_set(diag, AS_EIO, NULL, "client stopping");
        }
    }
    kh->queued = 0;
    k8s_wire_req rq = {
        kh->out.data, kh->out.len, clock_mono_ns() + (uint64_t)k->cfg.request_timeout_ms * 1000000u,
        wire_stop,    k,           n};
    k8s_wire_ans ans;
    as_diag wd = {{0}, {0}};
    as_err err = k8s_wire_send(&kh->wire, kh->h, &rq, &ans, &wd);
    kh->sent = ans.sent;
    if (err)
        return as_diag_set(diag, err, NULL, "POST to %s: %s", k->conn->server, wd.msg);
    return AS_OK;
}

/* See transport.h. */
as_err k8s_kept_post_recv(k8s_client *k, k8s_kept *kh, buf *resp, long *status, int64_t timeout_ms,
                          as_diag *diag)
{
    *status = 0;
    if (timeout_ms <= 0)
        timeout_ms = k->cfg.request_timeout_ms;
    k8s_wire_req rq = {NULL, 0, clock_mono_ns() + (uint64_t)timeout_ms * 1000000u, wire_stop, k, 1};
    k8s_wire_ans ans = {0};
    as_diag wd = {{0}, {0}};
    as_err err = k8s_wire_recv(&kh->wire, &rq, resp ? resp : &kh->resp, &ans, &wd);
    if (err)
        return as_diag_set(diag, err, NULL, "the answer from %s: %s", k->conn->server, wd.msg);
    *status = ans.status;
    if (ans.status == 401)
        k8s_token_invalidate(k);
    return AS_OK;
}

/* See transport.h. */
as_err k8s_request(k8s_client *k, const char *method, const char *path, const char *body,
                   size_t body_len, buf *resp, long *status, as_diag *diag)
{
    CURL *h = curl_easy_init();
    if (!h)
        return AS_ENOMEM;
    as_err err = k8s_do(k, h, method, path, body, body_len, resp, status, diag);
    curl_easy_cleanup(h);
    return err;
}

/* ---- status counters ----------------------------------------------- */

/* See transport.h. */
const char *k8s_kind_name(k8s_kind kind)
{
    static const char *const names[K8S_KIND__COUNT] = {"nodes", "pods", "nodeshards"};
    assert(kind >= 0 && kind < K8S_KIND__COUNT);
    return names[kind];
}

/* See transport.h. */
void k8s_mark_up(k8s_client *k, k8s_kind kind)
{
    pthread_mutex_lock(&k->st_mu);
    if (k->st.down_since_ms[kind]) {
        int64_t now = clock_now_ms();
        log_info("msg=\"watch stream up\" kind=%s down_ms=%lld", k8s_kind_name(kind),
                 (long long)(now - k->st.down_since_ms[kind]));
        k->st.up_since_ms[kind] = now;
    }
    k->st.down_since_ms[kind] = 0;
    pthread_mutex_unlock(&k->st_mu);
}

/* See transport.h. */
void k8s_mark_down(k8s_client *k, k8s_kind kind)
{
    pthread_mutex_lock(&k->st_mu);
    if (!k->st.down_since_ms[kind])
        k->st.down_since_ms[kind] = clock_now_ms();
    pthread_mutex_unlock(&k->st_mu);
}

/* See transport.h. */
void k8s_count(k8s_client *k, uint64_t *field, uint64_t n)
{
    pthread_mutex_lock(&k->st_mu);
    *field += n;
    pthread_mutex_unlock(&k->st_mu);
}

/* See transport.h. */
void k8s_mark_listed(k8s_client *k, k8s_kind kind)
{
    bool now_synced = false;
    pthread_mutex_lock(&k->st_mu);
    if (k->listed[kind] && kind != K8S_KIND_NODESHARD)
        k->st.relists[kind]++;
    k->listed[kind] = true;
    if (!k->st.synced && k->listed[K8S_KIND_NODE] && k->listed[K8S_KIND_POD]) {
        k->st.synced = true;
        k->st.synced_at_ms = clock_now_ms();
        now_synced = true;
    }
    pthread_mutex_unlock(&k->st_mu);
    if (now_synced) {
        if (k->cfg.synced_hook)
            k->cfg.synced_hook(k->cfg.synced_hook_arg);
        log_info("msg=\"cache synced with the API server\" server=%s", k->conn->server);
        pthread_mutex_lock(&k->mu);
        pthread_cond_broadcast(&k->cond);
        pthread_mutex_unlock(&k->mu);
    }
}

/* cfg.conn is borrowed: the client keeps its own deep copy. */
static as_err conn_copy(const k8s_conn *src, k8s_conn **out)
{
    k8s_conn *c = calloc(1, sizeof *c);
    if (!c)
        return AS_ENOMEM;
#define DUP(f)                                                                                     \
    do {                                                                                           \
        if (src->f && !(c->f = strdup(src->f)))                                                    \
            goto oom;                                                                              \
    } while (0)
#define DUPB(f)                                                                                    \
    do {                                                                                           \
        if (src->f.data) {                                                                         \
            if (!(c->f.data = malloc(src->f.len + 1)))                                             \
                goto oom;                                                                          \
            memcpy(c->f.data, src->f.data, src->f.len);                                            \
            c->f.data[src->f.len] = 0;                                                             \
            c->f.len = src->f.len;                                                                 \
        }                                                                                          \
    } while (0)
    DUP(server);
    DUP(context);
    DUP(ca_file);
    DUPB(ca_data);
    DUP(tls_server_name);
    DUP(token);
    DUP(token_file);
    DUP(cert_file);
    DUPB(cert_data);
    DUP(key_file);
    DUPB(key_data);
    DUP(username);
    DUP(password);
    c->insecure = src->insecure;
#undef DUP
#undef DUPB
    *out = c;
    return AS_OK;
oom:
    k8s_conn_free(c);
    return AS_ENOMEM;
}

/* wire_target splits url_base into the wire's Host and path prefix; both
 * stay NULL (requests go through libcurl) when the URL carries what only
 * libcurl's requests handle: user info, or basic auth configured. */
static as_err wire_target(k8s_client *k)
{
    const char *u = k->url_base, *auth = strstr(u, "://");
    if (!auth || k->conn->username)
        return AS_OK;
    auth += 3;
    size_t alen = strcspn(auth, "/?#");
    if (!alen || memchr(auth, '@', alen) || auth[alen] == '?' || auth[alen] == '#')
        return AS_OK;
    const char *prefix = auth + alen;
    size_t plen = strlen(prefix);
    while (plen && prefix[plen - 1] == '/')
        plen--; /* k8s_url joins url_base and a path starting with '/' */
    if (!(k->wire_host = strndup(auth, alen)) || !(k->wire_prefix = strndup(prefix, plen))) {
        free(k->wire_host);
        k->wire_host = NULL;
        return AS_ENOMEM;
    }
    return AS_OK;
}

/* See transport.h. */
as_err k8s_transport_init(k8s_client *k, as_diag *diag)
{
    const k8s_config *cfg = &k->cfg;
    as_err err;
    pthread_mutex_init(&k->mu, NULL);
    clock_cond_init(&k->cond);
    pthread_mutex_init(&k->tok_mu, NULL);
    pthread_mutex_init(&k->st_mu, NULL);
    k8s_rl_init(&k->rl, cfg->qps, cfg->burst);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (cfg->conn)
        err = conn_copy(cfg->conn, &k->conn);
    else if (cfg->in_cluster)
        err = k8s_conn_in_cluster(cfg->sa_dir, &k->conn, diag);
    else if (cfg->kubeconfig)
        err = k8s_conn_from_kubeconfig(cfg->kubeconfig, cfg->context, &k->conn, diag);
    else
        err = as_diag_set(diag, AS_EINVAL, "kubeconfig",
                          "live mode needs --kubeconfig FILE or --in-cluster");
    if (err)
        return err;
    char *connect_to = NULL;
    if ((err = k8s_conn_route(k->conn, &k->url_base, &connect_to, diag)))
        return err;
    if (connect_to) {
        k->connect_to = curl_slist_append(NULL, connect_to);
        free(connect_to);
        if (!k->connect_to)
            return AS_ENOMEM;
        log_info("msg=\"checking the API server certificate against tls-server-name\" "
                 "url=%s server=%s",
                 k->url_base, k->conn->server);
    }
    if (k->conn->token && !(k->token = strdup(k->conn->token)))
        return AS_ENOMEM;
    return wire_target(k);
}

/* See transport.h. */
void k8s_transport_fini(k8s_client *k)
{
    k8s_conn_free(k->conn);
    k->conn = NULL;
    free(k->url_base);
    k->url_base = NULL;
    free(k->wire_host);
    k->wire_host = NULL;
    free(k->wire_prefix);
    k->wire_prefix = NULL;
    curl_slist_free_all(k->connect_to);
    k->connect_to = NULL;
    free(k->token);
    k->token = NULL;
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->tok_mu);
    pthread_mutex_destroy(&k->rl.mu);
    pthread_mutex_destroy(&k->st_mu);
    curl_global_cleanup();
}

/* See transport.h. */
bool k8s_transport_stop(k8s_client *k)
{
    pthread_mutex_lock(&k->mu);
    bool was = k->stopped;
    k->stopped = true;
    __atomic_store_n(&k->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&k->cond);
    pthread_mutex_unlock(&k->mu);
    return !was;
}
