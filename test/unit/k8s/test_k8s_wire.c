/*
 * test_k8s_wire.c - the wire's HTTP/1.1 framing against a raw socket
 * server that answers each request with scripted bytes: lengths, chunks,
 * interim answers, answers to the end of the connection, Retry-After,
 * Connection: close, a kept connection the server closed (sent once
 * more), answers too large or not HTTP, timeouts and stop.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentsched/base/clock.h"
#include "agentsched/k8s/wire.h"

/* What the server does with one request it read. */
typedef enum act { KEEP, CLOSE_AFTER, CLOSE_UNANSWERED, SILENT, BYTE_BY_BYTE } act;

typedef struct step {
    const char *answer;
    act what;
} step;

typedef struct server {
    int lfd, port;
    const step *steps;
    int nsteps, next;
    int accepts;
    int stop; /* (atomic) */
    pthread_t t;
} server;

/* A connection's bytes read and not yet taken: pipelined requests may
 * come in one read. */
typedef struct inbuf {
    char b[65536];
    size_t n;
} inbuf;

/* read_request takes one request (head and Content-Length body) off the
 * connection; false at its end. */
static bool read_request(int fd, inbuf *in)
{
    for (;;) {
        in->b[in->n] = '\0';
        char *end = strstr(in->b, "\r\n\r\n");
        if (end) {
            const char *cl = strcasestr(in->b, "Content-Length:");
            if (cl > end)
                cl = NULL;
            size_t want = (size_t)(end + 4 - in->b) + (cl ? (size_t)atol(cl + 15) : 0);
            if (in->n >= want) {
                memmove(in->b, in->b + want, in->n - want);
                in->n -= want;
                return true;
            }
        }
        ssize_t r = read(fd, in->b + in->n, sizeof in->b - in->n - 1);
        if (r <= 0)
            return false;
        in->n += (size_t)r;
    }
}

static void *server_main(void *arg)
{
    server *s = arg;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {s->lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        s->accepts++;
        inbuf in = {.n = 0};
        while (s->next < s->nsteps && read_request(fd, &in)) {
            const step *st = &s->steps[s->next++];
            if (st->what == CLOSE_UNANSWERED)
                break;
            if (st->what == SILENT) {
                while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
                    usleep(10000);
                break;
            }
            size_t len = strlen(st->answer);
            if (st->what == BYTE_BY_BYTE) {
                for (size_t i = 0; i < len; i++) {
                    cr_assert_eq(write(fd, st->answer + i, 1), 1);
                    usleep(200);
                }
            } else {
                cr_assert_eq(write(fd, st->answer, len), (ssize_t)len);
            }
            if (st->what == CLOSE_AFTER)
                break;
        }
        close(fd);
    }
    return NULL;
}

static void server_start(server *s, const step *steps, int n)
{
    memset(s, 0, sizeof *s);
    s->steps = steps;
    s->nsteps = n;
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    getsockname(s->lfd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    cr_assert_eq(listen(s->lfd, 8), 0);
    cr_assert_eq(pthread_create(&s->t, NULL, server_main, s), 0);
}

static void server_stop(server *s)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_join(s->t, NULL);
    close(s->lfd);
}

static bool stop_now(void *arg)
{
    return __atomic_load_n((int *)arg, __ATOMIC_ACQUIRE) != 0;
}

typedef struct fx {
    server s;
    CURL *proto;
    k8s_wire w;
    buf resp;
    int stop;
} fx;

static void fx_init(fx *f, const step *steps, int n, size_t cap)
{
    memset(f, 0, sizeof *f);
    server_start(&f->s, steps, n);
    f->proto = curl_easy_init();
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", f->s.port);
    curl_easy_setopt(f->proto, CURLOPT_URL, url);
    k8s_wire_init(&f->w, cap);
    buf_init(&f->resp, cap);
}

static void fx_fini(fx *f)
{
    k8s_wire_free(&f->w);
    curl_easy_cleanup(f->proto);
    buf_free(&f->resp);
    server_stop(&f->s);
}

static const char REQ[] = "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}";

static as_err post(fx *f, int64_t timeout_ms, k8s_wire_ans *ans, as_diag *d)
{
    k8s_wire_req rq = {REQ,      sizeof REQ - 1, clock_mono_ns() + (uint64_t)timeout_ms * 1000000u,
                       stop_now, &f->stop,       1};
    return k8s_wire_do(&f->w, f->proto, &rq, &f->resp, ans, d);
}

/* posts_two starts f serving steps and makes two posts that succeed;
 * ans is the second's. */
static void posts_two(fx *f, const step *steps, int n, k8s_wire_ans *ans)
{
    fx_init(f, steps, n, 1024);
    as_diag d = {{0}, {0}};
    cr_assert_eq(post(f, 5000, ans, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(post(f, 5000, ans, &d), AS_OK, "%s", d.msg);
}

/* One exchange as data: the server's answer, what the wire gives back. */
typedef struct answer_case {
    const char *name;
    step step;
    as_err err;
    long status;
    const char *body;
    int64_t retry_after_ms;
    bool kept; /* the connection stays open afterwards */
} answer_case;

static const answer_case answers[] = {
    {"length",
     {"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello", KEEP},
     AS_OK,
     201,
     "hello",
     0,
     true},
    {"chunked",
     {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\n"
      "5\r\nworld\r\n0\r\nX-Trailer: y\r\n\r\n",
      KEEP},
     AS_OK,
     200,
     "hello world",
     0,
     true},
    {"interim",
     {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 409 Conflict\r\ncontent-length: 2\r\n\r\n{}", KEEP},
     AS_OK,
     409,
     "{}",
     0,
     true},
    {"retry_after",
     {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 0\r\n\r\n", KEEP},
     AS_OK,
     429,
     "",
     3000,
     true},
    {"close_header",
     {"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", KEEP},
     AS_OK,
     201,
     "x",
     0,
     false},
    {"to_eof",
     {"HTTP/1.1 500 Oops\r\n\r\nall of it", CLOSE_AFTER},
     AS_OK,
     500,
     "all of it",
     0,
     false},
    {"no_content", {"HTTP/1.1 204 No Content\r\n\r\n", KEEP}, AS_OK, 204, "", 0, true},
    {"byte_by_byte",
     {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", BYTE_BY_BYTE},
     AS_OK,
     200,
     "abc",
     0,
     true},
    {"too_big",
     {"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", KEEP},
     AS_ETOOBIG,
     0,
     NULL,
     0,
     false},
    {"not_http", {"SSH-2.0-OpenSSH\r\n\r\n", KEEP}, AS_EIO, 0, NULL, 0, false},
    {"bad_length",
     {"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", KEEP},
     AS_EIO,
     0,
     NULL,
     0,
     false},
    {"bad_chunk",
     {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", KEEP},
     AS_EIO,
     0,
     NULL,
     0,
     false},
    {"cut_short",
     {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", CLOSE_AFTER},
     AS_EIO,
     0,
     NULL,
     0,
     false},
};

Test(k8s_wire, answers_as_data)
{
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        const answer_case *c = &answers[i];
        fx f;
        fx_init(&f, &c->step, 1, 1024);
        k8s_wire_ans ans;
        as_diag d = {{0}, {0}};
        as_err err = post(&f, 5000, &ans, &d);
        cr_expect_eq(err, c->err, "%s: err %d (%s)", c->name, err, d.msg);
        cr_expect_eq(ans.status, c->status, "%s: status %ld", c->name, ans.status);
        cr_expect_eq(ans.sends, 1, "%s", c->name);
        cr_expect_eq(ans.sent, sizeof REQ - 1, "%s", c->name);
        if (c->body)
            cr_expect_str_eq(f.resp.len ? f.resp.data : "", c->body, "%s", c->name);
        cr_expect_eq(ans.retry_after_ms, c->retry_after_ms, "%s", c->name);
        cr_expect_eq(f.w.h != NULL, c->kept, "%s: kept", c->name);
        fx_fini(&f);
    }
}

/* Requests on one kept connection; after a Connection: close the next
 * one connects again. */
Test(k8s_wire, keeps_the_connection)
{
    static const step steps[] = {
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\na", KEEP},
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nb", KEEP},
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\nConnection: close\r\n\r\nc", KEEP},
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nd", KEEP},
    };
    fx f;
    fx_init(&f, steps, 4, 1024);
    const char *want = "abcd";
    for (int i = 0; i < 4; i++) {
        k8s_wire_ans ans;
        as_diag d = {{0}, {0}};
        cr_assert_eq(post(&f, 5000, &ans, &d), AS_OK, "%d: %s", i, d.msg);
        cr_assert_eq(f.resp.data[0], want[i]);
        cr_assert_eq(ans.sends, 1);
    }
    cr_expect_eq(f.s.accepts, 2);
    fx_fini(&f);
}

/* The server closes a kept connection as the request arrives: the
 * request goes out once more on a new connection, and says so. */
Test(k8s_wire, resent_once_when_a_kept_connection_dies)
{
    static const step steps[] = {
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\na", KEEP},
        {"", CLOSE_UNANSWERED},
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nb", KEEP},
    };
    fx f;
    k8s_wire_ans ans;
    posts_two(&f, steps, 3, &ans);
    cr_expect_eq(ans.sends, 2);
    cr_expect_eq(f.resp.data[0], 'b');
    cr_expect_eq(f.s.accepts, 2);
    fx_fini(&f);
}

/* The server closes a kept connection after an answer (an idle close).
 * A request soon after goes out on it unchecked and is sent once more on
 * a new connection; one after FRESH_NS finds it closed first and is sent
 * once. */
Test(k8s_wire, idle_close_found_before_or_after_sending)
{
    static const step steps[] = {
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\na", CLOSE_AFTER},
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nb", CLOSE_AFTER},
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nc", KEEP},
    };
    fx f;
    k8s_wire_ans ans;
    posts_two(&f, steps, 3, &ans);
    cr_expect_eq(f.resp.data[0], 'b');
    cr_expect_eq(ans.sends, 2, "sent on the closed connection, then again");
    usleep(600000);
    as_diag d = {{0}, {0}};
    cr_assert_eq(post(&f, 5000, &ans, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(f.resp.data[0], 'c');
    cr_expect_eq(ans.sends, 1, "the closed connection was found before sending");
    cr_expect_eq(f.s.accepts, 3);
    fx_fini(&f);
}

/* A request sent now and its answer read later, then the next request on
 * the same connection; a read with no connection is an error. */
Test(k8s_wire, send_now_read_the_answer_later)
{
    static const step steps[] = {
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\na", KEEP},
        {"HTTP/1.1 409 Conflict\r\nContent-Length: 1\r\n\r\nb", KEEP},
    };
    fx f;
    fx_init(&f, steps, 2, 1024);
    k8s_wire_req rq = {REQ, sizeof REQ - 1, clock_mono_ns() + 5000000000u, stop_now, &f.stop, 1};
    k8s_wire_ans ans;
    as_diag d = {{0}, {0}};
    cr_assert_not(k8s_wire_answered(&f.w), "no connection yet");
    cr_assert_eq(k8s_wire_send(&f.w, f.proto, &rq, &ans, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(ans.sends, 1);
    cr_expect_eq(ans.sent, sizeof REQ - 1);
    for (int t = 0; t < 2000 && !k8s_wire_answered(&f.w); t += 2)
        usleep(2000);
    cr_assert(k8s_wire_answered(&f.w));
    cr_expect(f.w.readable, "what the poll found is kept for the read");
    cr_assert_eq(k8s_wire_recv(&f.w, &rq, &f.resp, &ans, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(ans.status, 201);
    cr_expect_eq(f.resp.data[0], 'a');
    cr_expect_not(f.w.readable, "spent by the read");
    cr_assert_not(k8s_wire_answered(&f.w), "nothing more is due");
    cr_assert_eq(post(&f, 5000, &ans, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(ans.status, 409);
    cr_expect_eq(f.s.accepts, 1);
    k8s_wire_close(&f.w);
    cr_assert_eq(k8s_wire_recv(&f.w, &rq, &f.resp, &ans, &d), AS_EIO);
    fx_fini(&f);
}

/* Pipelined: three requests in one send, then one more before any
 * answer is read; the answers, in one write or spread over several, are
 * read one a call and in order. An answer past the last one due is not
 * an exchange we made: the connection is closed. */
Test(k8s_wire, pipelined_answers_read_in_order)
{
    static const step steps[] = {
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\na", KEEP},
        {"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\n", KEEP},
        {"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 1\r\n\r\nc", BYTE_BY_BYTE},
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nd"
         "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\ne",
         KEEP},
    };
    fx f;
    fx_init(&f, steps, 4, 1024);
    char three[3 * (sizeof REQ - 1) + 1];
    snprintf(three, sizeof three, "%s%s%s", REQ, REQ, REQ);
    k8s_wire_req rq3 = {three, strlen(three), clock_mono_ns() + 5000000000u, stop_now, &f.stop, 3};
    k8s_wire_req rq = {REQ, sizeof REQ - 1, clock_mono_ns() + 5000000000u, stop_now, &f.stop, 1};
    k8s_wire_ans ans;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_wire_send(&f.w, f.proto, &rq3, &ans, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(f.w.pending, 3);
    cr_assert_eq(k8s_wire_send(&f.w, f.proto, &rq, &ans, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(f.w.pending, 4);
    static const long want_status[] = {201, 201, 429, 201};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(k8s_wire_recv(&f.w, &rq, &f.resp, &ans, &d), AS_OK, "answer %d: %s", i, d.msg);
        cr_expect_eq(ans.status, want_status[i], "answer %d", i);
        cr_expect_eq(f.resp.len, 1);
        cr_expect_eq(f.resp.data[0], "abcd"[i], "answer %d", i);
        cr_expect_eq(f.w.pending, (unsigned)(3 - i));
    }
    cr_expect_eq(f.s.accepts, 1, "one connection");
    cr_assert_null(f.w.h, "the extra answer closed the connection");
    cr_expect_eq(f.w.in.len, 0);
    fx_fini(&f);
}

/* A connection lost with answers due loses them all. */
Test(k8s_wire, pipelined_answers_lost_with_the_connection)
{
    static const step steps[] = {
        {"HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\na", KEEP},
        {"", CLOSE_UNANSWERED},
    };
    fx f;
    fx_init(&f, steps, 2, 1024);
    char two[2 * (sizeof REQ - 1) + 1];
    snprintf(two, sizeof two, "%s%s", REQ, REQ);
    k8s_wire_req rq = {two, strlen(two), clock_mono_ns() + 5000000000u, stop_now, &f.stop, 2};
    k8s_wire_ans ans;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_wire_send(&f.w, f.proto, &rq, &ans, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(k8s_wire_recv(&f.w, &rq, &f.resp, &ans, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(ans.status, 201);
    cr_expect_eq(f.w.pending, 1);
    cr_assert_eq(k8s_wire_recv(&f.w, &rq, &f.resp, &ans, &d), AS_EIO);
    cr_expect_eq(f.w.pending, 0);
    cr_assert_null(f.w.h);
    fx_fini(&f);
}

/* A new connection that dies unanswered is not sent again. */
Test(k8s_wire, new_connection_unanswered_is_an_error)
{
    static const step steps[] = {{"", CLOSE_UNANSWERED}};
    fx f;
    fx_init(&f, steps, 1, 1024);
    k8s_wire_ans ans;
    as_diag d = {{0}, {0}};
    cr_assert_eq(post(&f, 5000, &ans, &d), AS_EIO);
    cr_expect_eq(ans.sends, 1);
    cr_expect(ans.sent > 0);
    cr_expect(strstr(d.msg, "before the answer"), "%s", d.msg);
    fx_fini(&f);
}

Test(k8s_wire, timeout_and_stop)
{
    static const step steps[] = {{"", SILENT}};
    fx f;
    fx_init(&f, steps, 1, 1024);
    k8s_wire_ans ans;
    as_diag d = {{0}, {0}};
    uint64_t t0 = clock_mono_ns();
    cr_assert_eq(post(&f, 300, &ans, &d), AS_ETIMEOUT, "%s", d.msg);
    uint64_t ms = (clock_mono_ns() - t0) / 1000000u;
    cr_expect(ms >= 290 && ms < 3000, "%llu ms", (unsigned long long)ms);
    cr_expect_null(f.w.h);
    __atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
    cr_assert_eq(post(&f, 60000, &ans, &d), AS_EIO);
    cr_expect(strstr(d.msg, "stopping"), "%s", d.msg);
    fx_fini(&f);
}

Test(k8s_wire, refused_connection_sends_nothing)
{
    fx f;
    fx_init(&f, NULL, 0, 1024);
    server_stop(&f.s); /* nobody listens on the port any more */
    k8s_wire_ans ans;
    as_diag d = {{0}, {0}};
    k8s_wire_req rq = {REQ, sizeof REQ - 1, clock_mono_ns() + 2000000000u, NULL, NULL, 1};
    cr_assert_eq(k8s_wire_do(&f.w, f.proto, &rq, &f.resp, &ans, &d), AS_EIO);
    cr_expect_eq(ans.sends, 0);
    cr_expect_eq(ans.sent, 0);
    k8s_wire_free(&f.w);
    curl_easy_cleanup(f.proto);
    buf_free(&f.resp);
}

/* ---- streamed answers ------------------------------------------------- */

/* collect is a stream sink appending to a buf. */
static void collect(void *arg, const char *data, size_t len)
{
    cr_assert_gt(len, 0, "an empty run handed on");
    cr_assert_eq(buf_append(arg, data, len), AS_OK);
}

/* One streamed body as data: its framing, its bytes as they come, what
 * the decoder hands on and ends with, and the bytes it leaves after. */
typedef struct body_case {
    const char *name;
    bool chunked, has_len;
    uint64_t length;
    const char *in;
    k8s_wire_parsed end;
    const char *body, *rest;
} body_case;

static const body_case bodies[] = {
    {"chunks", true, false, 0, "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", K8S_WIRE_DONE, "abcde", ""},
    {"extensions, trailer, bytes after", true, false, 0,
     "A;ext=1\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nHTTP", K8S_WIRE_DONE, "0123456789", "HTTP"},
    {"bare line ends, upper-case hex", true, false, 0, "A\n{\"type\":1}\n0\n\n", K8S_WIRE_DONE,
     "{\"type\":1}", ""},
    {"still going", true, false, 0, "4\r\nwxyz\r\n10\r\n0123", K8S_WIRE_MORE, "wxyz0123", ""},
    {"no size", true, false, 0, "\r\nabc", K8S_WIRE_BAD, "", ""},
    {"data longer than its size", true, false, 0, "2\r\nabc\r\n", K8S_WIRE_BAD, "ab", ""},
    {"sized", false, true, 5, "hello, again", K8S_WIRE_DONE, "hello", ", again"},
    {"sized, short", false, true, 9, "hello", K8S_WIRE_MORE, "hello", ""},
    {"to the end of the connection", false, false, 0, "all of it", K8S_WIRE_MORE, "all of it", ""},
};

/* take_split feeds c->in to a fresh decoder in pieces of step bytes
 * (0: all at once), as reads would bring them. */
static k8s_wire_parsed take_split(const body_case *c, size_t step, buf *out, buf *in)
{
    k8s_wire_body b;
    k8s_wire_body_start(&b, c->chunked, c->has_len, c->length);
    buf_reset(out);
    buf_reset(in);
    size_t len = strlen(c->in), at = 0;
    k8s_wire_parsed r = K8S_WIRE_MORE;
    while (r == K8S_WIRE_MORE && at < len) {
        size_t n = step && len - at > step ? step : len - at;
        cr_assert_eq(buf_append(in, c->in + at, n), AS_OK);
        at += n;
        r = k8s_wire_body_take(&b, in, collect, out);
    }
    /* what came after the end stays for whoever reads next */
    if (at < len)
        cr_assert_eq(buf_append(in, c->in + at, len - at), AS_OK);
    return r;
}

Test(k8s_wire, stream_bodies_as_data)
{
    buf out, in;
    buf_init(&out, 4096);
    buf_init(&in, 4096);
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        const body_case *c = &bodies[i];
        size_t steps[] = {0, 1, 2, 3, 7};
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            k8s_wire_parsed r = take_split(c, steps[s], &out, &in);
            cr_expect_eq(r, c->end, "%s, %zu bytes a read: %d", c->name, steps[s], (int)r);
            if (c->end == K8S_WIRE_BAD)
                continue;
            cr_expect(out.len == strlen(c->body) && !memcmp(out.data, c->body, out.len),
                      "%s, %zu bytes a read: \"%.*s\"", c->name, steps[s], (int)out.len,
                      out.data ? out.data : "");
            if (c->end == K8S_WIRE_DONE)
                cr_expect(in.len == strlen(c->rest) && !memcmp(in.data, c->rest, in.len),
                          "%s: %zu bytes left", c->name, in.len);
        }
    }
    buf_free(&out);
    buf_free(&in);
}

static const char GET[] = "GET /w?watch=true HTTP/1.1\r\nHost: t\r\n\r\n";

/* stream_open opens f's stream with a GET; errbody is f->resp. */
static as_err stream_open(fx *f, long *status, as_diag *d)
{
    k8s_wire_req rq = {GET, sizeof GET - 1, clock_mono_ns() + 5000000000u, stop_now, &f->stop, 1};
    return k8s_wire_stream_open(&f->w, f->proto, &rq, status, &f->resp, d);
}

/* stream_read reads f's stream for at most ms. */
static as_err stream_read(fx *f, int64_t ms, buf *out, bool *end, as_diag *d)
{
    k8s_wire_req rq = {NULL, 0, clock_mono_ns() + (uint64_t)ms * 1000000u, stop_now, &f->stop, 1};
    return k8s_wire_stream_read(&f->w, &rq, collect, out, end, d);
}

#define WATCH_HEAD "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"

/* A watch's chunks are handed on as they come, a byte at a time
 * included, until the last chunk ends the stream and its connection. */
Test(k8s_wire, stream_read_as_it_comes)
{
    static const step steps[] = {{"HTTP/1.1 100 Continue\r\n\r\n" WATCH_HEAD
                                  "Transfer-Encoding: chunked\r\n\r\n"
                                  "d\r\n{\"type\":\"A\"}\n\r\n"
                                  "d\r\n{\"type\":\"B\"}\n\r\n0\r\n\r\n",
                                  BYTE_BY_BYTE}};
    fx f;
    fx_init(&f, steps, 1, 1024);
    as_diag d = {{0}, {0}};
    long status = 0;
    cr_assert_eq(stream_open(&f, &status, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(status, 200);
    buf out;
    buf_init(&out, 4096);
    bool end = false;
    int reads = 0;
    while (!end) {
        cr_assert_eq(stream_read(&f, 5000, &out, &end, &d), AS_OK, "%s", d.msg);
        cr_assert_lt(++reads, 10000);
    }
    cr_assert_gt(reads, 2, "handed on as it came, not at the end");
    cr_assert_eq(out.len, 26);
    cr_assert(!memcmp(out.data, "{\"type\":\"A\"}\n{\"type\":\"B\"}\n", 26));
    cr_assert_null(f.w.h, "the stream's end closes its connection");
    cr_assert_eq(stream_read(&f, 100, &out, &end, &d), AS_EIO);
    buf_free(&out);
    fx_fini(&f);
}

/* An error's answer is read whole into errbody; a stream cut within a
 * chunk is an error; a quiet stream times out and stays open; a body
 * framed by the connection's end ends with it. */
Test(k8s_wire, stream_errors_quiet_and_unframed)
{
    static const step steps[] = {
        {"HTTP/1.1 410 Gone\r\nContent-Length: 14\r\n\r\n{\"code\":410}\r\n", KEEP},
        {WATCH_HEAD "Transfer-Encoding: chunked\r\n\r\n10\r\nabc", CLOSE_AFTER},
        {WATCH_HEAD "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", KEEP},
        {WATCH_HEAD "\r\nuntil the end", CLOSE_AFTER}};
    fx f;
    fx_init(&f, steps, 4, 1024);
    as_diag d = {{0}, {0}};
    long status = 0;
    buf out;
    buf_init(&out, 4096);
    bool end = false;
    cr_assert_eq(stream_open(&f, &status, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(status, 410);
    cr_assert_str_eq(f.resp.data, "{\"code\":410}\r\n");
    cr_assert_null(f.w.h);

    cr_assert_eq(stream_open(&f, &status, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(status, 200);
    as_err err;
    while ((err = stream_read(&f, 5000, &out, &end, &d)) == AS_OK && !end)
        ;
    cr_assert_eq(err, AS_EIO);
    cr_expect(strstr(d.msg, "within the stream"), "%s", d.msg);
    cr_assert_null(f.w.h);

    buf_reset(&out);
    cr_assert_eq(stream_open(&f, &status, &d), AS_OK, "%s", d.msg);
    while ((err = stream_read(&f, 200, &out, &end, &d)) == AS_OK)
        cr_assert_not(end);
    cr_assert_eq(err, AS_ETIMEOUT, "%s", d.msg);
    cr_assert_str_eq(out.data, "abc");
    cr_assert_not_null(f.w.h, "a quiet stream stays open");
    __atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
    cr_assert_eq(stream_read(&f, 5000, &out, &end, &d), AS_EIO);
    cr_expect(strstr(d.msg, "stopping"), "%s", d.msg);
    __atomic_store_n(&f.stop, 0, __ATOMIC_RELEASE);

    buf_reset(&out);
    cr_assert_eq(stream_open(&f, &status, &d), AS_OK, "%s", d.msg);
    while ((err = stream_read(&f, 5000, &out, &end, &d)) == AS_OK && !end)
        ;
    cr_assert_eq(err, AS_OK, "%s", d.msg);
    cr_assert(end);
    cr_assert_str_eq(out.data, "until the end");
    buf_free(&out);
    fx_fini(&f);
}
