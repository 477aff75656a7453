/*
 * wire.h - one HTTP/1.1 keep-alive connection whose requests agentsched
 * frames itself: libcurl opens the connection (CURLOPT_CONNECT_ONLY: the
 * TCP connect, TLS with its verification and client certificates stay
 * libcurl's) and the request's bytes go out in one curl_easy_send, the
 * answer is read with curl_easy_recv and parsed here (status line,
 * Content-Length or chunked body, Connection: close, Retry-After).
 *
 * This is the per-pod writes' path (Bindings, Events) and the watches'
 * read path: a request through curl_easy_perform spends about as much CPU
 * in libcurl's own machinery (URL parsing, header assembly, its state
 * machine and their allocations) as in the kernel, and none of it is
 * needed to send a few hundred bytes of JSON on a connection that is
 * already open, or to read a stream's next event.
 *
 * A wire is used by one thread at a time. k8s_wire_do never pipelines:
 * its request is answered before the next goes out. k8s_wire_send may
 * (HTTP/1.1 pipelining, for best-effort writes whose answers are read
 * later): several requests in one send, or sends before the answers to
 * earlier ones are read; k8s_wire_recv reads the answers in order, one a
 * call, keeping the bytes of the next. A request on a reused connection
 * that fails before the first byte of an answer (the server closed an
 * idle connection) is sent once more on a new connection, as libcurl
 * does; the answer reports both sends. A connection that answered in the
 * last half second is not polled for such a close before sending (the
 * resend covers it), and the first read of an answer waits for the socket
 * instead of trying first: two system calls a request fewer.
 */
#ifndef AGENTSCHED_K8S_WIRE_H
#define AGENTSCHED_K8S_WIRE_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/error.h"

/* The answer's head is at most this large (status line and headers; the
 * API server's are under a KiB). */
#define K8S_WIRE_HEAD_MAX ((size_t)16 << 10)

/* What a parser made of the bytes it was given (k8s_wire_parse,
 * k8s_wire_body_take). */
typedef enum k8s_wire_parsed {
    K8S_WIRE_MORE,
    K8S_WIRE_DONE,
    K8S_WIRE_BAD,
    K8S_WIRE_BIG
} k8s_wire_parsed;

/* Where the reading of a streamed body is (k8s_wire_body_take). */
typedef struct k8s_wire_body {
    unsigned char state; /* where the decoder is; 0: no body */
    uint64_t left;       /* bytes left of the chunk, or of a sized body */
} k8s_wire_body;

typedef struct k8s_wire {
    CURL *h;            /* the open connection's handle; NULL: none */
    curl_socket_t fd;   /* its socket */
    buf in;             /* the answers' bytes as read and not yet taken (capped) */
    uint64_t done_ns;   /* clock_mono_ns() when its last answer was read */
    unsigned pending;   /* requests sent whose answers were not read */
    k8s_wire_body body; /* the streamed answer's body, when one is open */
    bool readable;      /* k8s_wire_answered's poll found the socket readable,
                           and no read has followed yet */
} k8s_wire;

/* One request: its bytes as they go on the wire (request line, headers,
 * the blank line, the body), sent with one write. */
typedef struct k8s_wire_req {
    const char *data;
    size_t len;
    uint64_t deadline_ns;    /* clock_mono_ns() past which the request times out */
    bool (*stop)(void *arg); /* polled while waiting; true aborts; may be NULL */
    void *stop_arg;
    unsigned count; /* requests in data, for k8s_wire_send (0: one) */
} k8s_wire_req;

/* What came back. sends: times the request went out (2: resent once on a
 * new connection); sent: bytes of the last send that reached the socket
 * (0: it never left, so it cannot have been applied). */
typedef struct k8s_wire_ans {
    long status;
    int64_t retry_after_ms; /* Retry-After in seconds, as ms; 0: none */
    unsigned sends;
    size_t sent;
} k8s_wire_ans;

/* k8s_wire_init makes an unconnected wire whose answer bodies may be up
 * to body_cap bytes (a chunked one's framing may add an eighth); k8s_wire_close closes its
 * connection (the wire stays usable: the next request connects again); k8s_wire_free closes it and
 * frees its buffer. */
void k8s_wire_init(k8s_wire *w, size_t body_cap);
void k8s_wire_close(k8s_wire *w);
void k8s_wire_free(k8s_wire *w);

/*
 * k8s_wire_do sends rq and reads its answer, the body into resp (reset
 * first; resp's cap applies). proto: a handle with the connection's
 * options (URL, TLS, timeouts), duplicated when the wire connects; it is
 * borrowed and left unchanged. Errors, with ans->status 0 unless the
 * answer's head was read: AS_ETIMEOUT (rq->deadline_ns passed), AS_EIO
 * (no connection, the connection broke, rq->stop said stop, or the answer
 * is not HTTP/1.1 this parser takes), AS_ETOOBIG (the body passes resp's
 * cap or the head K8S_WIRE_HEAD_MAX), AS_ENOMEM; diag says which. After
 * an error the connection is closed.
 */
as_err k8s_wire_do(k8s_wire *w, CURL *proto, const k8s_wire_req *rq, buf *resp, k8s_wire_ans *ans,
                   as_diag *diag);

/*
 * k8s_wire_send and k8s_wire_recv are k8s_wire_do in two steps, for a
 * caller that reads the answer later (a best-effort write whose outcome
 * the sender does not wait for): send connects when no kept connection
 * is open and writes rq (rq->count requests), never sending it twice;
 * recv reads the next answer due (w->pending counts them) into resp (rq
 * gives the deadline and stop; the bytes are not used). More sends may
 * come before the recvs (pipelining), each answer read by its own recv,
 * in order. Errors as k8s_wire_do's; after one the connection is closed
 * and every answer still due is lost (w->pending is 0). k8s_wire_do is
 * not called while answers are due.
 */
as_err k8s_wire_send(k8s_wire *w, CURL *proto, const k8s_wire_req *rq, k8s_wire_ans *ans,
                     as_diag *diag);
as_err k8s_wire_recv(k8s_wire *w, const k8s_wire_req *rq, buf *resp, k8s_wire_ans *ans,
                     as_diag *diag);

/* k8s_wire_answered: the open connection has bytes (or its close) to
 * read, or holds some read already, so a k8s_wire_recv would not wait for
 * the first of them (nor poll again: what the poll found is kept until
 * the next read). */
bool k8s_wire_answered(k8s_wire *w);

/*
 * A streamed answer (a watch: a 200 whose body lasts as long as the
 * connection, chunked or not), read as it comes instead of whole.
 *
 * k8s_wire_stream_open sends rq (a GET) on a new connection and reads
 * the answer's head, *status its status. A 200's body is then read with
 * k8s_wire_stream_read. Any other answer is read whole, its body into
 * errbody (reset first; a body past its cap leaves it empty, which is
 * no error), and the connection closed. Errors as k8s_wire_do's (never
 * sent again).
 *
 * k8s_wire_stream_read hands the body's bytes that came, chunk framing
 * removed, to sink, waiting for them until rq->deadline_ns: AS_OK when
 * some were handed on (call again for more; the socket may hold them
 * already) or, with *end, when the body ended (its last chunk, or the
 * connection's end for a body framed by it; the connection is then
 * closed). AS_ETIMEOUT: nothing came by the deadline; the stream stays
 * open. AS_EIO: rq->stop said stop, the connection broke or closed
 * within the body, or the framing is not HTTP/1.1's; AS_ENOMEM. After
 * any error but AS_ETIMEOUT the connection is closed.
 */
typedef void (*k8s_wire_sink)(void *arg, const char *data, size_t len);
as_err k8s_wire_stream_open(k8s_wire *w, CURL *proto, const k8s_wire_req *rq, long *status,
                            buf *errbody, as_diag *diag);
as_err k8s_wire_stream_read(k8s_wire *w, const k8s_wire_req *rq, k8s_wire_sink sink, void *arg,
                            bool *end, as_diag *diag);

/*
 * k8s_wire_body_take is the streamed body's decoder alone
 * (k8s_wire_stream_read reads with it): it hands what in holds of the
 * body to sink and removes those bytes, framing included, from in,
 * keeping an incomplete chunk-size line or line end for the next call.
 * b: where the body's reading is (set by k8s_wire_body_start: chunked,
 * else length bytes, else up to the connection's end when !has_len).
 * K8S_WIRE_DONE: the body ended (bytes after it stay in in); MORE: it
 * needs more; BAD: broken chunk framing.
 */
void k8s_wire_body_start(k8s_wire_body *b, bool chunked, bool has_len, uint64_t length);
k8s_wire_parsed k8s_wire_body_take(k8s_wire_body *b, buf *in, k8s_wire_sink sink, void *arg);

/*
 * k8s_wire_parse is the answer's parser alone (k8s_wire_do reads with
 * it): in holds the bytes read so far (an interim 1xx answer at its start
 * is removed from it), eof that the connection has ended. K8S_WIRE_DONE:
 * the answer is whole, *status set, its body in resp (reset first),
 * *reusable when the connection may carry the next request; MORE: it
 * needs more bytes (at eof: the answer was cut short); BAD: not an HTTP/1.1 answer this parser
 * takes; BIG: the body passes resp's cap or the head K8S_WIRE_HEAD_MAX.
 */
k8s_wire_parsed k8s_wire_parse(buf *in, bool eof, buf *resp, long *status, bool *reusable);

#endif
