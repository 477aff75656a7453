/* wire.c - HTTP/1.1 requests framed here on a connection libcurl opened. */
#include "agentsched/k8s/wire.h"

#include <assert.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agentsched/base/clock.h"

/* A wait is cut into slices this long, so that rq->stop is seen soon. */
#define WAIT_SLICE_MS 100
/* A connection that answered this recently is taken as open without
 * polling it first: the API server closes idle connections after
 * minutes, and a close it did in between is caught by the resend below. */
#define FRESH_NS 500000000u
/* What one receive asks for: an answer is usually one TLS record. */
#define RECV_CHUNK ((size_t)16 << 10)

/* See wire.h. */
void k8s_wire_init(k8s_wire *w, size_t body_cap)
{
    memset(w, 0, sizeof *w);
    w->fd = CURL_SOCKET_BAD;
    /* chunk framing and the head on top of the body */
    buf_init(&w->in, body_cap + body_cap / 8 + K8S_WIRE_HEAD_MAX);
}

/* See wire.h. */
void k8s_wire_close(k8s_wire *w)
{
    if (w->h)
        curl_easy_cleanup(w->h);
    w->h = NULL;
    w->fd = CURL_SOCKET_BAD;
    w->pending = 0;
    w->readable = false;
    memset(&w->body, 0, sizeof w->body);
    buf_reset(&w->in);
}

/* See wire.h. */
void k8s_wire_free(k8s_wire *w)
{
    k8s_wire_close(w);
    buf_free(&w->in);
}

static int64_t ms_left(const k8s_wire_req *rq)
{
    uint64_t now = clock_mono_ns();
    return now >= rq->deadline_ns ? 0 : (int64_t)((rq->deadline_ns - now) / 1000000u) + 1;
}

/* wait_fd waits until the socket is ready for events: AS_OK, AS_ETIMEOUT
 * past the deadline, AS_EIO when told to stop. */
static as_err wait_fd(k8s_wire *w, short events, const k8s_wire_req *rq, as_diag *diag)
{
    for (;;) {
        if (rq->stop && rq->stop(rq->stop_arg))
            return as_diag_set(diag, AS_EIO, NULL, "client stopping");
        int64_t left = ms_left(rq);
        if (left <= 0)
            return as_diag_set(diag, AS_ETIMEOUT, NULL, "timed out");
        struct pollfd pfd = {.fd = w->fd, .events = events};
        int r = poll(&pfd, 1, (int)(left < WAIT_SLICE_MS ? left : WAIT_SLICE_MS));
        if (r > 0)
            return AS_OK; /* readable, writable or hung up: the next call says which */
    }
}

/* open_conn connects a new handle duplicated from proto. */
static as_err open_conn(k8s_wire *w, CURL *proto, const k8s_wire_req *rq, as_diag *diag)
{
    k8s_wire_close(w);
    CURL *h = curl_easy_duphandle(proto);
    if (!h)
        return AS_ENOMEM;
    /* Only the connection's options matter; the prototype's transfer
     * callbacks point at its own caller's data. */
    curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, NULL);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, NULL);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 1L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, NULL);
    int64_t left = ms_left(rq);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(left > 0 ? left : 1));
    CURLcode cc = curl_easy_perform(h);
    curl_socket_t fd = CURL_SOCKET_BAD;
    if (cc == CURLE_OK && curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &fd) == CURLE_OK &&
        fd != CURL_SOCKET_BAD) {
        w->h = h;
        w->fd = fd;
        return AS_OK;
    }
    curl_easy_cleanup(h);
    if (cc == CURLE_OPERATION_TIMEDOUT)
        return as_diag_set(diag, AS_ETIMEOUT, NULL, "connect timed out");
    return as_diag_set(diag, AS_EIO, NULL, "%s",
                       cc == CURLE_OK ? "no socket after connect" : curl_easy_strerror(cc));
}

/* See wire.h. */
bool k8s_wire_answered(k8s_wire *w)
{
    if (!w->h)
        return false;
    if (w->in.len || w->readable)
        return true;
    struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
    w->readable = poll(&pfd, 1, 0) > 0;
    return w->readable;
}

/* alive: a kept connection the server has not closed. Between answers
 * nothing is due from the server, so readable means closed or broken;
 * what a read consumes without data (a TLS 1.3 session ticket) is not. */
static bool alive(k8s_wire *w)
{
    if (!k8s_wire_answered(w))
        return true;
    char b[256];
    size_t n = 0;
    w->readable = false;
    return curl_easy_recv(w->h, b, sizeof b, &n) == CURLE_AGAIN;
}

/* send_all writes the request; *sent: the bytes that left. */
static as_err send_all(k8s_wire *w, const k8s_wire_req *rq, size_t *sent, as_diag *diag)
{
    *sent = 0;
    while (*sent < rq->len) {
        size_t n = 0;
        CURLcode cc = curl_easy_send(w->h, rq->data + *sent, rq->len - *sent, &n);
        *sent += n;
        if (cc == CURLE_AGAIN) {
            as_err err = wait_fd(w, POLLOUT, rq, diag);
            if (err)
                return err;
        } else if (cc != CURLE_OK) {
            return as_diag_set(diag, AS_EIO, NULL, "send: %s", curl_easy_strerror(cc));
        }
    }
    return AS_OK;
}

/* ---- the answer ------------------------------------------------------ */

/* What the head said. */
typedef struct answer_head {
    long status;
    size_t body_at; /* offset of the body in w->in */
    bool chunked, has_len, close, to_eof;
    uint64_t content_len;
    int64_t retry_after_ms;
} answer_head;

static bool name_is(const char *p, size_t n, const char *name)
{
    return strlen(name) == n && !strncasecmp(p, name, n);
}

static bool value_has(const char *v, size_t n, const char *token)
{
    size_t t = strlen(token);
    for (size_t i = 0; i + t <= n; i++)
        if (!strncasecmp(v + i, token, t))
            return true;
    return false;
}

/* parse_head reads the status line and the headers that frame the body
 * from in[0..end), the head ending at end (its blank line excluded). */
static k8s_wire_parsed parse_head(const char *in, size_t end, answer_head *a)
{
    memset(a, 0, sizeof *a);
    if (end < 12 || memcmp(in, "HTTP/1.", 7) != 0 || in[8] != ' ')
        return K8S_WIRE_BAD;
    long st = 0;
    for (int i = 9; i < 12; i++) {
        if (in[i] < '0' || in[i] > '9')
            return K8S_WIRE_BAD;
        st = st * 10 + (in[i] - '0');
    }
    if (st < 100 || st > 599)
        return K8S_WIRE_BAD;
    a->status = st;
    const char *p = memchr(in, '\n', end);
    p = p ? p + 1 : in + end;
    while (p < in + end) {
        const char *eol = memchr(p, '\n', (size_t)(in + end - p));
        const char *le = eol ? eol : in + end;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (colon) {
            size_t nlen = (size_t)(colon - p);
            const char *v = colon + 1;
            while (v < le && (*v == ' ' || *v == '\t'))
                v++;
            size_t vlen = (size_t)(le - v);
            while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == ' '))
                vlen--;
            if (name_is(p, nlen, "content-length")) {
                uint64_t n = 0;
                if (!vlen)
                    return K8S_WIRE_BAD;
                for (size_t i = 0; i < vlen; i++) {
                    if (v[i] < '0' || v[i] > '9' || n > UINT64_MAX / 10 - 10)
                        return K8S_WIRE_BAD;
                    n = n * 10 + (uint64_t)(v[i] - '0');
                }
                if (a->has_len && n != a->content_len)
                    return K8S_WIRE_BAD;
                a->has_len = true;
                a->content_len = n;
            } else if (name_is(p, nlen, "transfer-encoding")) {
                a->chunked = value_has(v, vlen, "chunked");
            } else if (name_is(p, nlen, "connection")) {
                a->close = a->close || value_has(v, vlen, "close");
            } else if (name_is(p, nlen, "retry-after")) {
                int64_t sec = 0; /* seconds; an HTTP date is ignored */
                for (size_t i = 0; i < vlen && v[i] >= '0' && v[i] <= '9' && sec < 86400; i++)
                    sec = sec * 10 + (v[i] - '0');
                a->retry_after_ms = sec * 1000;
            }
        }
        p = le + 1;
    }
    if (a->chunked)
        a->has_len = false;
    else if (!a->has_len && a->status != 204 && a->status != 304)
        a->to_eof = true;
    return K8S_WIRE_DONE;
}

/* A chunk-size line (with extensions) longer than this is not one. */
#define SIZE_LINE_MAX 1024

/* chunk_size reads a chunk-size line's hex digits from p[0..n) (what
 * follows them, extensions, is ignored); false when it has none or
 * overflows. */
static bool chunk_size(const char *p, size_t n, uint64_t *size)
{
    uint64_t v = 0;
    size_t digits = 0;
    for (; digits < n; digits++) {
        char c = p[digits];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            break;
        if (v > (UINT64_MAX >> 8))
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *size = v;
    return digits > 0;
}

/* chunks walks a chunked body from in[at..len): K8S_WIRE_DONE with *end past the
 * last chunk's trailer; copies the data into out when out is not NULL. */
static k8s_wire_parsed chunks(const char *in, size_t len, size_t at, buf *out, size_t *end)
{
    for (;;) {
        const char *eol = memchr(in + at, '\n', len - at);
        if (!eol)
            return len - at > SIZE_LINE_MAX ? K8S_WIRE_BAD : K8S_WIRE_MORE;
        uint64_t size = 0;
        if (!chunk_size(in + at, (size_t)(eol - (in + at)), &size))
            return K8S_WIRE_BAD;
        at = (size_t)(eol - in) + 1; /* extensions after the size are ignored */
        if (!size) {
            /* trailer lines, then the blank line */
            for (;;) {
                const char *tl = memchr(in + at, '\n', len - at);
                if (!tl)
                    return K8S_WIRE_MORE;
                size_t l = (size_t)(tl - (in + at));
                at = (size_t)(tl - in) + 1;
                if (l == 0 || (l == 1 && in[at - 2] == '\r')) {
                    *end = at;
                    return K8S_WIRE_DONE;
                }
            }
        }
        if (size > len - at || len - at - size < 2)
            return K8S_WIRE_MORE;
        if (out && buf_append(out, in + at, size) != AS_OK)
            return K8S_WIRE_BIG;
        at += size;
        if (in[at] == '\r')
            at++;
        if (in[at] != '\n')
            return K8S_WIRE_BAD;
        at++;
    }
}

/* take_head parses the final answer's head at the start of inb into *a
 * (a->body_at: where its body starts), removing interim answers (100
 * Continue) before it: K8S_WIRE_DONE, MORE (the head is not whole yet),
 * BAD, or BIG (past K8S_WIRE_HEAD_MAX). */
static k8s_wire_parsed take_head(buf *inb, answer_head *a)
{
    for (;;) {
        const char *in = inb->data;
        size_t len = inb->len;
        const char *hend = len >= 4 ? memmem(in, len, "\r\n\r\n", 4) : NULL;
        if (!hend)
            return len > K8S_WIRE_HEAD_MAX ? K8S_WIRE_BIG : K8S_WIRE_MORE;
        k8s_wire_parsed ps = parse_head(in, (size_t)(hend - in), a);
        if (ps != K8S_WIRE_DONE)
            return ps;
        a->body_at = (size_t)(hend - in) + 4;
        if (a->status >= 200)
            return K8S_WIRE_DONE;
        /* an interim answer: the real one follows */
        memmove(inb->data, in + a->body_at, len - a->body_at);
        inb->len = len - a->body_at;
    }
}

/* parse_answer is k8s_wire_parse with the head's fields kept in *a and
 * *used: the answer's bytes at the start of inb (more may follow). */
static k8s_wire_parsed parse_answer(buf *inb, bool eof, answer_head *a, buf *resp, size_t *used)
{
    k8s_wire_parsed ps = take_head(inb, a);
    if (ps != K8S_WIRE_DONE)
        return ps;
    const char *in = inb->data;
    size_t len = inb->len;
    size_t end = a->body_at;
    if (a->chunked) {
        ps = chunks(in, len, a->body_at, NULL, &end);
        if (ps != K8S_WIRE_DONE)
            return ps;
        buf_reset(resp);
        ps = chunks(in, len, a->body_at, resp, &end);
        if (ps != K8S_WIRE_DONE)
            return ps;
    } else if (a->has_len) {
        if (a->content_len > resp->cap)
            return K8S_WIRE_BIG;
        if (len - a->body_at < a->content_len)
            return K8S_WIRE_MORE;
        end = a->body_at + (size_t)a->content_len;
        buf_reset(resp);
        if (buf_append(resp, in + a->body_at, end - a->body_at) != AS_OK)
            return K8S_WIRE_BIG;
    } else if (a->to_eof) {
        if (len - a->body_at > resp->cap)
            return K8S_WIRE_BIG;
        if (!eof)
            return K8S_WIRE_MORE;
        end = len;
        buf_reset(resp);
        if (buf_append(resp, in + a->body_at, end - a->body_at) != AS_OK)
            return K8S_WIRE_BIG;
    } else {
        buf_reset(resp);
    }
    *used = end;
    return K8S_WIRE_DONE;
}

/* See wire.h. */
k8s_wire_parsed k8s_wire_parse(buf *in, bool eof, buf *resp, long *status, bool *reusable)
{
    answer_head a;
    size_t used = 0;
    k8s_wire_parsed ps = parse_answer(in, eof, &a, resp, &used);
    *status = ps == K8S_WIRE_DONE ? a.status : 0;
    /* bytes past the answer: not an exchange we made */
    *reusable = ps == K8S_WIRE_DONE && used == in->len && !a.close && !a.to_eof;
    return ps;
}

/* not_http: the answer in w->in is not HTTP/1.1 this parser takes (its
 * start, printable, goes in the diag for the log). */
static as_err not_http(const k8s_wire *w, as_diag *diag)
{
    char seen[41];
    as_printable(seen, sizeof seen, w->in.data);
    return as_diag_set(diag, AS_EIO, NULL, "answer is not HTTP/1.1 (\"%s\")", seen);
}

/* recv_more reads what the connection has into w->in, waiting for it
 * until rq's deadline (with wait, before trying a read): AS_OK with bytes
 * added or *eof (the connection ended); AS_ETIMEOUT; AS_EIO when told to
 * stop or the connection broke; AS_ETOOBIG / AS_ENOMEM when w->in has no
 * room. Wait when nothing can be there yet but what the socket shows: a
 * read takes a whole TLS record (at most RECV_CHUNK of data), so nothing
 * is left inside the TLS layer unseen, and a read that could only say
 * "again" is a system call and a TLS call spent. */
static as_err recv_more(k8s_wire *w, const k8s_wire_req *rq, bool wait, bool *eof, as_diag *diag)
{
    *eof = false;
    if (buf_reserve(&w->in, RECV_CHUNK) != AS_OK)
        return as_diag_set(diag, w->in.err == AS_ENOMEM ? AS_ENOMEM : AS_ETOOBIG, NULL,
                           "more than %zu bytes unread", w->in.cap);
    as_err err = wait ? wait_fd(w, POLLIN, rq, diag) : AS_OK;
    if (err)
        return err;
    for (;;) {
        size_t n = 0;
        w->readable = false;
        CURLcode cc = curl_easy_recv(w->h, w->in.data + w->in.len, RECV_CHUNK, &n);
        if (cc == CURLE_AGAIN) {
            if ((err = wait_fd(w, POLLIN, rq, diag)))
                return err;
            continue;
        }
        if (cc != CURLE_OK)
            return as_diag_set(diag, AS_EIO, NULL, "receive: %s", curl_easy_strerror(cc));
        *eof = n == 0;
        w->in.len += n;
        w->in.data[w->in.len] = '\0';
        return AS_OK;
    }
}

/* read_answer reads until parse_answer is done, and takes the answer's
 * bytes off w->in: what follows it there is the start of the next
 * pipelined answer, kept for the next read (with no request left
 * unanswered it is not an exchange we made, and the connection is
 * closed). *nothing: the connection ended before a byte of the answer
 * came (a kept connection the server had closed). */
static as_err read_answer(k8s_wire *w, const k8s_wire_req *rq, buf *resp, answer_head *a,
                          bool *nothing, as_diag *diag)
{
    *nothing = true;
    bool eof = false;
    size_t used = 0;
    /* Nothing of the answer can be there yet unless an earlier read
     * brought it: wait for it before the first read (a read that could
     * only say "again" is a system call and a TLS call spent); a poll
     * of k8s_wire_answered's that found it there is not made again */
    if (!w->in.len) {
        as_err werr = w->readable ? AS_OK : wait_fd(w, POLLIN, rq, diag);
        if (werr)
            return werr;
    } else {
        *nothing = false;
    }
    for (;;) {
        k8s_wire_parsed ps =
            w->in.len || eof ? parse_answer(&w->in, eof, a, resp, &used) : K8S_WIRE_MORE;
        if (ps == K8S_WIRE_DONE) {
            if (w->pending)
                w->pending--;
            size_t rest = w->in.len - used;
            if ((rest && !w->pending) || a->close || a->to_eof) {
                k8s_wire_close(w);
            } else {
                memmove(w->in.data, w->in.data + used, rest);
                w->in.len = rest;
                if (w->in.data)
                    w->in.data[rest] = '\0';
            }
            w->done_ns = clock_mono_ns();
            return AS_OK;
        }
        if (ps == K8S_WIRE_BIG)
            return as_diag_set(diag, AS_ETOOBIG, NULL, "answer larger than %zu bytes", resp->cap);
        if (ps == K8S_WIRE_BAD)
            return not_http(w, diag);
        if (eof)
            return as_diag_set(diag, AS_EIO, NULL, "connection closed %s the answer",
                               *nothing ? "before" : "within");
        as_err err = recv_more(w, rq, false, &eof, diag);
        if (err == AS_ETOOBIG)
            return as_diag_set(diag, err, NULL, "answer larger than %zu bytes", resp->cap);
        if (err)
            return err;
        *nothing = *nothing && eof;
    }
}

/* put opens a connection when no kept one is open and sends rq on it;
 * *reused: it went on a kept connection. ans->sends and ->sent count it. */
static as_err put(k8s_wire *w, CURL *proto, const k8s_wire_req *rq, bool *reused, k8s_wire_ans *ans,
                  as_diag *diag)
{
    /* With answers due, the connection is in use: readable is not closed. */
    *reused = w->h && (w->pending || clock_mono_ns() - w->done_ns < FRESH_NS || alive(w));
    as_err err = *reused ? AS_OK : open_conn(w, proto, rq, diag);
    if (err)
        return err;
    size_t sent = 0;
    err = send_all(w, rq, &sent, diag);
    if (sent) {
        ans->sends++;
        ans->sent = sent;
    }
    if (!err)
        w->pending += rq->count ? rq->count : 1;
    return err;
}

/* take reads the answer to what put sent; *nothing: not one byte came. */
static as_err take(k8s_wire *w, const k8s_wire_req *rq, buf *resp, bool *nothing, k8s_wire_ans *ans,
                   as_diag *diag)
{
    answer_head a;
    as_err err = read_answer(w, rq, resp, &a, nothing, diag);
    if (!err) {
        ans->status = a.status;
        ans->retry_after_ms = a.retry_after_ms;
    }
    return err;
}

/* See wire.h. */
as_err k8s_wire_do(k8s_wire *w, CURL *proto, const k8s_wire_req *rq, buf *resp, k8s_wire_ans *ans,
                   as_diag *diag)
{
    assert(!w->pending); /* answers due to a pipelining caller would be read as this one's */
    memset(ans, 0, sizeof *ans);
    for (int attempt = 0;; attempt++) {
        bool reused, nothing = true;
        as_err err = put(w, proto, rq, &reused, ans, diag);
        if (!err)
            err = take(w, rq, resp, &nothing, ans, diag);
        if (!err)
            return AS_OK;
        k8s_wire_close(w);
        /* The server may close a kept connection just as the request goes
         * out; libcurl sends it again on a new one, once, and so do we. */
        if (!(reused && attempt == 0 && err == AS_EIO && nothing &&
              !(rq->stop && rq->stop(rq->stop_arg))))
            return err;
    }
}

/* See wire.h. */
as_err k8s_wire_send(k8s_wire *w, CURL *proto, const k8s_wire_req *rq, k8s_wire_ans *ans,
                     as_diag *diag)
{
    memset(ans, 0, sizeof *ans);
    bool reused;
    as_err err = put(w, proto, rq, &reused, ans, diag);
    if (err)
        k8s_wire_close(w);
    return err;
}

/* See wire.h. */
as_err k8s_wire_recv(k8s_wire *w, const k8s_wire_req *rq, buf *resp, k8s_wire_ans *ans,
                     as_diag *diag)
{
    if (!w->h)
        return as_diag_set(diag, AS_EIO, NULL, "no connection to read an answer from");
    bool nothing = true;
    as_err err = take(w, rq, resp, &nothing, ans, diag);
    if (err)
        k8s_wire_close(w);
    return err;
}

/* ---- a streamed answer ---------------------------------------------- */

/* Where a streamed body's reading is (k8s_wire_body.state). */
enum {
    BODY_NONE,
    BODY_SIZE,     /* at a chunk-size line */
    BODY_DATA,     /* within a chunk's data, left bytes of it to come */
    BODY_DATA_END, /* at the line end after a chunk's data */
    BODY_TRAILER,  /* after the last chunk: trailer lines, then a blank one */
    BODY_LENGTH,   /* a sized body, left bytes of it to come */
    BODY_TO_EOF    /* a body the connection's end ends */
};

/* See wire.h. */
void k8s_wire_body_start(k8s_wire_body *b, bool chunked, bool has_len, uint64_t length)
{
    b->left = chunked || !has_len ? 0 : length;
    b->state = chunked ? BODY_SIZE : has_len ? BODY_LENGTH : BODY_TO_EOF;
}

/* See wire.h. */
k8s_wire_parsed k8s_wire_body_take(k8s_wire_body *b, buf *in, k8s_wire_sink sink, void *arg)
{
    const char *p = in->data;
    size_t len = in->len, at = 0;
    k8s_wire_parsed r = K8S_WIRE_MORE;
    while (r == K8S_WIRE_MORE && at < len) {
        const char *eol;
        size_t n;
        switch (b->state) {
        case BODY_SIZE:
        case BODY_TRAILER:
            eol = memchr(p + at, '\n', len - at);
            if (!eol) {
                if (len - at > SIZE_LINE_MAX)
                    r = K8S_WIRE_BAD;
                goto out;
            }
            n = (size_t)(eol - (p + at)); /* the line, without its \n */
            if (b->state == BODY_TRAILER) {
                if (n == 0 || (n == 1 && p[at] == '\r')) {
                    b->state = BODY_NONE;
                    r = K8S_WIRE_DONE;
                }
            } else if (!chunk_size(p + at, n, &b->left)) {
                r = K8S_WIRE_BAD;
                goto out;
            } else {
                b->state = b->left ? BODY_DATA : BODY_TRAILER;
            }
            at += n + 1;
            break;
        case BODY_DATA:
        case BODY_LENGTH:
        case BODY_TO_EOF:
            n = len - at;
            if (b->state != BODY_TO_EOF && n > b->left)
                n = (size_t)b->left;
            if (n)
                sink(arg, p + at, n);
            at += n;
            if (b->state == BODY_TO_EOF)
                break;
            b->left -= n;
            if (!b->left && b->state == BODY_DATA) {
                b->state = BODY_DATA_END;
            } else if (!b->left) {
                b->state = BODY_NONE;
                r = K8S_WIRE_DONE;
            }
            break;
        case BODY_DATA_END:
            if (p[at] == '\r') {
                if (at + 1 == len)
                    goto out; /* its \n is still to come */
                at++;
            }
            if (p[at] != '\n') {
                r = K8S_WIRE_BAD;
                goto out;
            }
            at++;
            b->state = BODY_SIZE;
            break;
        default:
            r = K8S_WIRE_BAD;
            goto out;
        }
    }
    /* a sized body of 0 bytes, or one whose last bytes came exactly */
    if (r == K8S_WIRE_MORE && b->state == BODY_LENGTH && !b->left) {
        b->state = BODY_NONE;
        r = K8S_WIRE_DONE;
    }
out:
    if (at) {
        memmove(in->data, in->data + at, len - at);
        in->len = len - at;
        in->data[in->len] = '\0';
    }
    return r;
}

/* See wire.h. */
as_err k8s_wire_stream_open(k8s_wire *w, CURL *proto, const k8s_wire_req *rq, long *status,
                            buf *errbody, as_diag *diag)
{
    *status = 0;
    /* a stream lasts minutes and ends with its connection: always a new one */
    as_err err = open_conn(w, proto, rq, diag);
    size_t sent = 0;
    if (!err)
        err = send_all(w, rq, &sent, diag);
    answer_head a;
    while (!err) {
        k8s_wire_parsed ps = take_head(&w->in, &a);
        if (ps == K8S_WIRE_MORE) {
            bool eof = false;
            if (!(err = recv_more(w, rq, true, &eof, diag)) && eof)
                err = as_diag_set(diag, AS_EIO, NULL, "connection closed before the answer");
            continue;
        }
        if (ps == K8S_WIRE_BIG) {
            err = as_diag_set(diag, AS_ETOOBIG, NULL, "answer head over %zu bytes",
                              K8S_WIRE_HEAD_MAX);
            break;
        }
        if (ps == K8S_WIRE_BAD) {
            err = not_http(w, diag);
            break;
        }
        if (a.status != 200) {
            /* an error's Status: read whole (past errbody's cap, left out) */
            w->pending = 1;
            bool nothing;
            buf_reset(errbody);
            err = read_answer(w, rq, errbody, &a, &nothing, diag);
            if (err == AS_ETOOBIG)
                err = AS_OK;
            if (!err)
                *status = a.status;
            break;
        }
        memmove(w->in.data, w->in.data + a.body_at, w->in.len - a.body_at);
        w->in.len -= a.body_at;
        w->in.data[w->in.len] = '\0';
        *status = 200;
        k8s_wire_body_start(&w->body, a.chunked, a.has_len, a.content_len);
        return AS_OK;
    }
    k8s_wire_close(w);
    return err;
}

/* See wire.h. */
as_err k8s_wire_stream_read(k8s_wire *w, const k8s_wire_req *rq, k8s_wire_sink sink, void *arg,
                            bool *end, as_diag *diag)
{
    *end = false;
    as_err err = AS_OK;
    if (!w->h || w->body.state == BODY_NONE)
        return as_diag_set(diag, AS_EIO, NULL, "no stream open to read");
    for (;;) {
        size_t before = w->in.len;
        bool sized_end = w->body.state == BODY_LENGTH && !w->body.left;
        k8s_wire_parsed r = w->in.len || sized_end ? k8s_wire_body_take(&w->body, &w->in, sink, arg)
                                                   : K8S_WIRE_MORE;
        if (r == K8S_WIRE_DONE) {
            *end = true;
            goto done;
        }
        if (r == K8S_WIRE_BAD) {
            err = as_diag_set(diag, AS_EIO, NULL, "the stream's chunks are not HTTP/1.1's");
            goto done;
        }
        /* handed on (or framing taken): the caller goes on, reading again
         * when it comes back, as the socket may hold more already */
        if (w->in.len < before)
            return AS_OK;
        bool eof = false;
        err = recv_more(w, rq, true, &eof, diag);
        if (err == AS_ETIMEOUT)
            return err;
        if (err)
            goto done;
        if (eof) {
            if (w->body.state == BODY_TO_EOF)
                *end = true;
            else
                err = as_diag_set(diag, AS_EIO, NULL, "connection closed within the stream");
            goto done;
        }
    }
done:
    k8s_wire_close(w);
    return err;
}
