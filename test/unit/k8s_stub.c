/* k8s_stub.c - in-process fake API server; see k8s_stub.h. */
#include "k8s_stub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STUB_MAX_CONNS  256
#define STUB_MAX_FAULTS 64
#define STUB_MAX_SNAPS  64

typedef struct stub_event {
    int kind;
    char type[16];
    json_t *obj;
    uint64_t rv;
} stub_event;

typedef struct stub_faultq {
    char prefix[128];
    stub_req type;
    stub_fault_kind f;
    int arg;
} stub_faultq;

typedef struct stub_snap {
    int id;
    int kind;
    json_t *items;
    uint64_t rv;
} stub_snap;

typedef struct stub_conn {
    k8s_stub *s;
    int fd;
    pthread_t th;
    bool used;
    bool done;
    bool watching;
    bool drop; /* close abruptly */
} stub_conn;

struct k8s_stub {
    int lfd;
    uint16_t port;
    char url[64];
    pthread_t accept_th;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop;
    json_t *objs[STUB__KINDS]; /* key -> object */
    json_t *leases;            /* "ns/name" -> coordination.k8s.io/v1 Lease */
    json_t *configmaps;        /* "ns/name" -> v1 ConfigMap (GET only) */
    uint64_t rv;
    uint64_t compacted;
    stub_event *log;
    size_t nlog, caplog;
    bool paused;
    bool shards_installed;
    stub_faultq faults[STUB_MAX_FAULTS];
    int nfaults;
    stub_snap snaps[STUB_MAX_SNAPS];
    int nsnaps, snap_seq;
    stub_conn conns[STUB_MAX_CONNS];
    int nconns;
    /* counters */
    struct {
        char prefix[128];
        stub_req type;
    } reqlog[4096];
    int nreq;
    int events_posted;
    json_t *last_event;
    int inflight_binds, max_inflight_binds;
    int bind_delay_ms;
    char last_auth[4096];
};

static const char *const stub_paths[STUB__KINDS] = {"/api/v1/nodes", "/api/v1/pods",
                                                    "/apis/shard.volcano.sh/v1alpha1/nodeshards"};

/* ------------------------------------------------------------------ */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool send_fmt(int fd, const char *fmt, ...)
{
    char tmp[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return n > 0 && send_all(fd, tmp, (size_t)n);
}

static bool send_response_hdr(int fd, int status, const char *extra, const char *body);

static bool send_response(int fd, int status, const char *body)
{
    return send_response_hdr(fd, status, "", body);
}

/* send_response with extra header lines (each ending in \r\n). */
static bool send_response_hdr(int fd, int status, const char *extra, const char *body)
{
    const char *reason = status == 200   ? "OK"
                         : status == 201 ? "Created"
                         : status == 404 ? "Not Found"
                         : status == 409 ? "Conflict"
                         : status == 410 ? "Gone"
                         : status == 429 ? "Too Many Requests"
                                         : "Error";
    size_t n = strlen(body);
    return send_fmt(fd,
                    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%sContent-Length: "
                    "%zu\r\n\r\n",
                    status, reason, extra, n) &&
           send_all(fd, body, n);
}

static bool send_status(int fd, int code, const char *reason, const char *msg)
{
    json_t *st = json_pack("{s:s,s:s,s:{},s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                           "metadata", "status", "Failure", "reason", reason, "code", code);
    json_object_set_new(st, "message", json_string(msg));
    char *b = json_dumps(st, JSON_COMPACT);
    bool ok = send_response(fd, code, b);
    free(b);
    json_decref(st);
    return ok;
}

static bool send_chunk(int fd, const char *data, size_t n)
{
    return send_fmt(fd, "%zx\r\n", n) && send_all(fd, data, n) && send_all(fd, "\r\n", 2);
}

static const char *obj_key(int kind, const json_t *obj, char *tmp, size_t len)
{
    const json_t *md = json_object_get(obj, "metadata");
    if (kind == STUB_POD) {
        const char *uid = json_string_value(json_object_get(md, "uid"));
        if (uid)
            return uid;
    }
    snprintf(tmp, len, "%s", json_string_value(json_object_get(md, "name")));
    return tmp;
}

static void set_rv(json_t *obj, uint64_t rv)
{
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)rv);
    json_t *md = json_object_get(obj, "metadata");
    json_object_set_new(md, "resourceVersion", json_string(b));
}

/* Appends a watch event (under mu). */
static void log_event(k8s_stub *s, int kind, const char *type, json_t *obj)
{
    if (s->nlog == s->caplog) {
        s->caplog = s->caplog ? s->caplog * 2 : 256;
        s->log = realloc(s->log, s->caplog * sizeof *s->log);
    }
    stub_event *e = &s->log[s->nlog++];
    e->kind = kind;
    snprintf(e->type, sizeof e->type, "%s", type);
    e->obj = json_deep_copy(obj);
    e->rv = s->rv;
    pthread_cond_broadcast(&s->cond);
}

void stub_put(k8s_stub *s, int kind, json_t *obj)
{
    char tmp[256];
    pthread_mutex_lock(&s->mu);
    const char *key = obj_key(kind, obj, tmp, sizeof tmp);
    bool existed = json_object_get(s->objs[kind], key) != NULL;
    s->rv++;
    set_rv(obj, s->rv);
    /* A copy: the caller's reference and the stub's (replaced by a binding
     * on another thread) must not share a refcount, which jansson does not
     * update with the ordering ThreadSanitizer needs. */
    json_t *own = json_deep_copy(obj);
    json_object_set_new(s->objs[kind], key, own);
    log_event(s, kind, existed ? "MODIFIED" : "ADDED", own);
    pthread_mutex_unlock(&s->mu);
}

bool stub_delete(k8s_stub *s, int kind, const char *key)
{
    pthread_mutex_lock(&s->mu);
    json_t *o = json_object_get(s->objs[kind], key);
    bool ok = o != NULL;
    if (o) {
        json_incref(o);
        json_object_del(s->objs[kind], key);
        s->rv++;
        set_rv(o, s->rv);
        log_event(s, kind, "DELETED", o);
        json_decref(o);
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void stub_bookmark(k8s_stub *s, int kind)
{
    pthread_mutex_lock(&s->mu);
    json_t *o = json_pack("{s:s,s:{}}", "kind", kind == STUB_NODE ? "Node" : "Pod", "metadata");
    set_rv(o, s->rv);
    log_event(s, kind, "BOOKMARK", o);
    json_decref(o);
    pthread_mutex_unlock(&s->mu);
}

void stub_compact(k8s_stub *s)
{
    pthread_mutex_lock(&s->mu);
    s->compacted = s->rv;
    pthread_mutex_unlock(&s->mu);
}

void stub_pause_watches(k8s_stub *s, bool paused)
{
    pthread_mutex_lock(&s->mu);
    s->paused = paused;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

void stub_drop_watches(k8s_stub *s)
{
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nconns; i++)
        if (s->conns[i].used && !s->conns[i].done && s->conns[i].watching)
            s->conns[i].drop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

void stub_set_shards_installed(k8s_stub *s, bool installed)
{
    pthread_mutex_lock(&s->mu);
    s->shards_installed = installed;
    pthread_mutex_unlock(&s->mu);
}

void stub_fault(k8s_stub *s, const char *prefix, stub_req type, stub_fault_kind f, int arg)
{
    pthread_mutex_lock(&s->mu);
    if (s->nfaults < STUB_MAX_FAULTS) {
        stub_faultq *q = &s->faults[s->nfaults++];
        snprintf(q->prefix, sizeof q->prefix, "%s", prefix);
        q->type = type;
        q->f = f;
        q->arg = arg;
    }
    pthread_mutex_unlock(&s->mu);
}

int stub_faults_pending(k8s_stub *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->nfaults;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* A prefix ending in '$' matches only paths whose rest has no further
 * segment: ".../pods/s$" takes ".../pods/s0" but not ".../pods/s0/status". */
static bool fault_path_matches(const char *prefix, const char *path)
{
    size_t n = strlen(prefix);
    bool leaf = n > 0 && prefix[n - 1] == '$';
    if (leaf)
        n--;
    if (strncmp(path, prefix, n) != 0)
        return false;
    if (!leaf)
        return true;
    size_t rest = strcspn(path + n, "?");
    return memchr(path + n, '/', rest) == NULL;
}

/* Pops the first fault matching path/type (under mu); false when none. */
static bool take_fault(k8s_stub *s, const char *path, stub_req type, stub_faultq *out)
{
    for (int i = 0; i < s->nfaults; i++) {
        stub_faultq *q = &s->faults[i];
        if (fault_path_matches(q->prefix, path) && (q->type == STUB_ANY || q->type == type)) {
            *out = *q;
            memmove(q, q + 1, (size_t)(s->nfaults - i - 1) * sizeof *q);
            s->nfaults--;
            return true;
        }
    }
    return false;
}

int stub_count(k8s_stub *s, const char *prefix, stub_req type)
{
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nreq; i++)
        if (strncmp(s->reqlog[i].prefix, prefix, strlen(prefix)) == 0 &&
            (type == STUB_ANY || s->reqlog[i].type == type))
            n++;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int stub_events_posted(k8s_stub *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->events_posted;
    pthread_mutex_unlock(&s->mu);
    return n;
}

json_t *stub_last_event(k8s_stub *s)
{
    pthread_mutex_lock(&s->mu);
    json_t *e = s->last_event ? json_deep_copy(s->last_event) : NULL;
    pthread_mutex_unlock(&s->mu);
    return e;
}

int stub_connections(k8s_stub *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->nconns;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int stub_watchers(k8s_stub *s)
{
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nconns; i++)
        if (s->conns[i].used && !s->conns[i].done && s->conns[i].watching)
            n++;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int stub_max_inflight_binds(k8s_stub *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->max_inflight_binds;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void stub_set_bind_delay(k8s_stub *s, int ms)
{
    pthread_mutex_lock(&s->mu);
    s->bind_delay_ms = ms;
    pthread_mutex_unlock(&s->mu);
}

void stub_last_auth(k8s_stub *s, char *out, size_t len)
{
    pthread_mutex_lock(&s->mu);
    snprintf(out, len, "%s", s->last_auth);
    pthread_mutex_unlock(&s->mu);
}

json_t *stub_objects(k8s_stub *s, int kind)
{
    json_t *arr = json_array();
    pthread_mutex_lock(&s->mu);
    const char *k;
    json_t *v;
    json_object_foreach(s->objs[kind], k, v) json_array_append_new(arr, json_deep_copy(v));
    pthread_mutex_unlock(&s->mu);
    return arr;
}

json_t *stub_make_node(const char *name, const char *cpu, const char *mem, int pods)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{},s:{s:{s:s,s:s,s:i},s:[{s:s,s:s}]}}",
                     "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "uid", name,
                     "labels", "kubernetes.io/hostname", name, "spec", "status", "allocatable",
                     "cpu", cpu, "memory", mem, "pods", pods, "conditions", "type", "Ready",
                     "status", "True");
}

json_t *stub_make_pod(const char *ns, const char *name, const char *uid, const char *node,
                      const char *cpu, const char *mem)
{
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s,s:[{s:s,s:s,s:{s:{s:s,s:s}}}]},s:{s:s}}",
                          "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace",
                          ns, "uid", uid, "spec", "schedulerName", "agent-scheduler", "containers",
                          "name", "c", "image", "busybox", "resources", "requests", "cpu", cpu,
                          "memory", mem, "status", "phase", node ? "Running" : "Pending");
    if (node)
        json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node));
    return p;
}

/* ------------------------------------------------------------------ */
/* Request handling                                                    */
/* ------------------------------------------------------------------ */

static const char *query_get(const char *query, const char *key, char *out, size_t len)
{
    if (!query)
        return NULL;
    size_t kl = strlen(key);
    const char *p = query;
    while (p && *p) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t n = strcspn(v, "&");
            if (n >= len)
                n = len - 1;
            /* %XX decoding is enough for continue tokens and selectors. */
            size_t o = 0;
            for (size_t i = 0; i < n && o + 1 < len; i++) {
                if (v[i] == '%' && i + 2 < n + 1) {
                    char hex[3] = {v[i + 1], v[i + 2], 0};
                    out[o++] = (char)strtol(hex, NULL, 16);
                    i += 2;
                } else {
                    out[o++] = v[i];
                }
            }
            out[o] = 0;
            return out;
        }
        p = strchr(p, '&');
        if (p)
            p++;
    }
    return NULL;
}

/* Serves a list page (with a snapshot per list). Returns false to close. */
static bool serve_list(k8s_stub *s, int fd, int kind, const char *query, bool expire_cont)
{
    char limit_s[32], cont[128];
    int limit = query_get(query, "limit", limit_s, sizeof limit_s) ? atoi(limit_s) : 0;
    const char *c = query_get(query, "continue", cont, sizeof cont);
    if (c && expire_cont)
        return send_status(fd, 410, "Expired",
                           "The provided continue parameter is too old to display a consistent "
                           "list result.");
    pthread_mutex_lock(&s->mu);
    stub_snap *sn = NULL;
    size_t off = 0;
    if (c) {
        int id = 0;
        size_t o = 0;
        if (sscanf(c, "snap-%d-%zu", &id, &o) == 2)
            for (int i = 0; i < s->nsnaps; i++)
                if (s->snaps[i].id == id)
                    sn = &s->snaps[i], off = o;
        if (!sn) {
            pthread_mutex_unlock(&s->mu);
            return send_status(fd, 410, "Expired", "continue token unknown");
        }
    } else {
        if (s->nsnaps == STUB_MAX_SNAPS) {
            json_decref(s->snaps[0].items);
            memmove(&s->snaps[0], &s->snaps[1], (STUB_MAX_SNAPS - 1) * sizeof s->snaps[0]);
            s->nsnaps--;
        }
        sn = &s->snaps[s->nsnaps++];
        sn->id = ++s->snap_seq;
        sn->kind = kind;
        sn->rv = s->rv;
        sn->items = json_array();
        const char *k;
        json_t *v;
        json_object_foreach(s->objs[kind], k, v)
            json_array_append_new(sn->items, json_deep_copy(v));
    }
    size_t total = json_array_size(sn->items);
    size_t end = limit > 0 && off + (size_t)limit < total ? off + (size_t)limit : total;
    json_t *items = json_array();
    for (size_t i = off; i < end; i++) {
        json_t *it = json_deep_copy(json_array_get(sn->items, i));
        json_object_del(it, "kind"); /* the real API omits them on items */
        json_object_del(it, "apiVersion");
        json_array_append_new(items, it);
    }
    char rvb[32], contb[64] = "";
    snprintf(rvb, sizeof rvb, "%llu", (unsigned long long)sn->rv);
    if (end < total)
        snprintf(contb, sizeof contb, "snap-%d-%zu", sn->id, end);
    pthread_mutex_unlock(&s->mu);
    json_t *doc = json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "apiVersion", "v1", "kind", "List",
                            "metadata", "resourceVersion", rvb, "continue", contb, "items", items);
    char *b = json_dumps(doc, JSON_COMPACT);
    bool ok = send_response(fd, 200, b);
    free(b);
    json_decref(doc);
    return ok;
}

static bool conn_gone(int fd)
{
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0)
        return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
        return true;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0;
}

static bool serve_watch(k8s_stub *s, stub_conn *cn, int kind, const char *query, bool have_f,
                        stub_faultq f)
{
    int fd = cn->fd;
    char rvs[64];
    uint64_t from = query_get(query, "resourceVersion", rvs, sizeof rvs) ? strtoull(rvs, 0, 10) : 0;
    if (!send_fmt(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                      "chunked\r\n\r\n"))
        return false;
    if (have_f && f.f == STUB_F_GARBAGE) {
        const char *g = "<html>this is not json</html>\n";
        if (!send_chunk(fd, g, strlen(g)))
            return false;
    }
    pthread_mutex_lock(&s->mu);
    bool too_old = from < s->compacted;
    pthread_mutex_unlock(&s->mu);
    if ((have_f && f.f == STUB_F_ERROR_410) || too_old) {
        const char *e = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
                        "\"status\":\"Failure\",\"message\":\"too old resource version\","
                        "\"reason\":\"Expired\",\"code\":410}}\n";
        send_chunk(fd, e, strlen(e));
        return send_all(fd, "0\r\n\r\n", 5);
    }
    bool hang = have_f && f.f == STUB_F_HANG;
    bool drop_mid = have_f && f.f == STUB_F_DROP_MID;
    pthread_mutex_lock(&s->mu);
    cn->watching = true;
    size_t next = 0;
    while (next < s->nlog && s->log[next].rv <= from)
        next++;
    bool ok = true;
    for (;;) {
        if (s->stop || cn->drop) {
            ok = false;
            break;
        }
        if (!hang && !s->paused && next < s->nlog) {
            stub_event *e = &s->log[next++];
            if (e->kind != kind)
                continue;
            json_t *ev = json_pack("{s:s,s:O}", "type", e->type, "object", e->obj);
            char *line = json_dumps(ev, JSON_COMPACT);
            json_decref(ev);
            size_t n = strlen(line);
            line = realloc(line, n + 2);
            line[n++] = '\n';
            line[n] = 0;
            pthread_mutex_unlock(&s->mu);
            bool sent;
            if (drop_mid) {
                send_chunk(fd, line, n / 2);
                sent = false;
            } else {
                sent = send_chunk(fd, line, n);
            }
            free(line);
            pthread_mutex_lock(&s->mu);
            if (!sent) {
                ok = false;
                break;
            }
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        bool gone = conn_gone(fd);
        pthread_mutex_lock(&s->mu);
        if (gone) {
            ok = false;
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
    }
    cn->watching = false;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* serve_binding applies a Binding; answer false closes the connection
 * instead of answering (a lost answer), after applying it. */
static bool serve_binding(k8s_stub *s, int fd, const char *ns, const char *name, const char *body,
                          bool answer)
{
    pthread_mutex_lock(&s->mu);
    s->inflight_binds++;
    if (s->inflight_binds > s->max_inflight_binds)
        s->max_inflight_binds = s->inflight_binds;
    int delay = s->bind_delay_ms;
    pthread_mutex_unlock(&s->mu);
    if (delay)
        sleep_ms(delay);
    json_t *b = json_loads(body, 0, NULL);
    const char *target = json_string_value(json_object_get(json_object_get(b, "target"), "name"));
    bool ok;
    pthread_mutex_lock(&s->mu);
    json_t *pod = NULL;
    const char *k;
    json_t *v;
    json_object_foreach(s->objs[STUB_POD], k, v)
    {
        json_t *md = json_object_get(v, "metadata");
        if (!strcmp(json_string_value(json_object_get(md, "name")), name) &&
            !strcmp(json_string_value(json_object_get(md, "namespace")), ns))
            pod = v;
    }
    if (!target) {
        pthread_mutex_unlock(&s->mu);
        ok = send_status(fd, 400, "BadRequest", "no target");
    } else if (!pod) {
        pthread_mutex_unlock(&s->mu);
        char m[512];
        snprintf(m, sizeof m, "pods \"%s\" not found", name);
        ok = send_status(fd, 404, "NotFound", m);
    } else {
        const char *cur =
            json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
        if (cur && *cur) {
            char m[1024];
            snprintf(m, sizeof m,
                     "Operation cannot be fulfilled on pods/binding \"%s\": pod %s is already "
                     "assigned to node \"%s\"",
                     name, name, cur);
            pthread_mutex_unlock(&s->mu);
            ok = send_status(fd, 409, "Conflict", m);
        } else {
            json_t *np = json_deep_copy(pod);
            json_object_set_new(json_object_get(np, "spec"), "nodeName", json_string(target));
            json_object_set_new(json_object_get(np, "status"), "phase", json_string("Running"));
            pthread_mutex_unlock(&s->mu);
            stub_put(s, STUB_POD, np);
            json_decref(np);
            ok = answer &&
                 send_response(fd, 201,
                               "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                               "\"status\":\"Success\",\"code\":201}");
        }
    }
    json_decref(b);
    pthread_mutex_lock(&s->mu);
    s->inflight_binds--;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static bool same_rv(const json_t *md_a, const json_t *md_b);

/* store_and_send stores obj (a copy) and answers with it and code. */
static bool store_and_send(k8s_stub *s, int fd, int kind, json_t *obj, int code)
{
    stub_put(s, kind, obj);
    char *out = json_dumps(obj, JSON_COMPACT);
    bool ok = send_response(fd, code, out);
    free(out);
    return ok;
}

/* pod_key finds pod ns/name's key (its uid) in the stub; NULL when none.
 * Called with the lock held. */
static const char *pod_key(k8s_stub *s, const char *ns, const char *name)
{
    const char *k, *found = NULL;
    json_t *v;
    json_object_foreach(s->objs[STUB_POD], k, v)
    {
        json_t *md = json_object_get(v, "metadata");
        if (!strcmp(json_string_value(json_object_get(md, "name")), name) &&
            !strcmp(json_string_value(json_object_get(md, "namespace")), ns))
            found = k;
    }
    return found;
}

/* serve_pod_patch applies a JSON merge patch of metadata.annotations to
 * pod ns/name as the API server does with the patch's preconditions: a
 * metadata.uid that is not the pod's is 422 (immutable field), a
 * metadata.resourceVersion that is not the stored one 409. */
static bool serve_pod_patch(k8s_stub *s, int fd, const char *ns, const char *name, const char *body)
{
    json_t *b = json_loads(body, 0, NULL);
    json_t *bmd = json_object_get(b, "metadata");
    pthread_mutex_lock(&s->mu);
    const char *key = pod_key(s, ns, name);
    json_t *pod = key ? json_object_get(s->objs[STUB_POD], key) : NULL;
    const char *k;
    json_t *v;
    bool ok;
    char m[1024];
    json_t *md = json_object_get(pod, "metadata");
    const char *uid = json_string_value(json_object_get(bmd, "uid"));
    const char *rv = json_string_value(json_object_get(bmd, "resourceVersion"));
    if (!b) {
        pthread_mutex_unlock(&s->mu);
        ok = send_status(fd, 400, "BadRequest", "not JSON");
    } else if (!pod) {
        pthread_mutex_unlock(&s->mu);
        snprintf(m, sizeof m, "pods \"%s\" not found", name);
        ok = send_status(fd, 404, "NotFound", m);
    } else if (uid && strcmp(uid, json_string_value(json_object_get(md, "uid")))) {
        pthread_mutex_unlock(&s->mu);
        snprintf(m, sizeof m,
                 "Pod \"%s\" is invalid: metadata.uid: Invalid value: \"%s\": field is immutable",
                 name, uid);
        ok = send_status(fd, 422, "Invalid", m);
    } else if (rv && !same_rv(bmd, md)) {
        pthread_mutex_unlock(&s->mu);
        snprintf(m, sizeof m,
                 "Operation cannot be fulfilled on pods \"%s\": the object has been modified; "
                 "please apply your changes to the latest version and try again",
                 name);
        ok = send_status(fd, 409, "Conflict", m);
    } else {
        json_t *np = json_deep_copy(pod);
        json_t *nmd = json_object_get(np, "metadata");
        json_t *an = json_object_get(nmd, "annotations");
        if (!json_is_object(an)) {
            an = json_object();
            json_object_set_new(nmd, "annotations", an);
        }
        json_object_foreach(json_object_get(bmd, "annotations"), k, v)
        {
            if (json_is_null(v))
                json_object_del(an, k);
            else
                json_object_set(an, k, v);
        }
        pthread_mutex_unlock(&s->mu);
        ok = store_and_send(s, fd, STUB_POD, np, 200);
        json_decref(np);
    }
    json_decref(b);
    return ok;
}

/* merge_patch applies the JSON merge patch p to the object t (RFC 7386):
 * null deletes a member, an object merges into an object, anything else
 * replaces. */
static void merge_patch(json_t *t, const json_t *p)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)p, k, v)
    {
        json_t *cur = json_object_get(t, k);
        if (json_is_null(v)) {
            json_object_del(t, k);
        } else if (json_is_object(v)) {
            if (!json_is_object(cur)) {
                cur = json_object();
                json_object_set_new(t, k, cur);
            }
            merge_patch(cur, v);
        } else {
            json_object_set(t, k, v);
        }
    }
}

/* serve_pod_status_patch applies a strategic merge patch of
 * pods/NAME/status as the API server does for the parts kube-scheduler
 * sends: status.conditions merge by type (a patched condition's fields
 * replace those of the one of its type, or it is appended), the rest of
 * status merges as a JSON merge patch. */
static bool serve_pod_status_patch(k8s_stub *s, int fd, const char *ns, const char *name,
                                   const char *body)
{
    json_t *b = json_loads(body, 0, NULL);
    json_t *pst = json_object_get(b, "status");
    if (!json_is_object(pst)) {
        json_decref(b);
        return send_status(fd, 400, "BadRequest", "no status in the patch");
    }
    pthread_mutex_lock(&s->mu);
    const char *key = pod_key(s, ns, name);
    json_t *pod = key ? json_deep_copy(json_object_get(s->objs[STUB_POD], key)) : NULL;
    pthread_mutex_unlock(&s->mu);
    bool ok;
    if (!pod) {
        char m[600];
        snprintf(m, sizeof m, "pods \"%s\" not found", name);
        ok = send_status(fd, 404, "NotFound", m);
    } else {
        json_t *st = json_object_get(pod, "status");
        if (!json_is_object(st)) {
            st = json_object();
            json_object_set_new(pod, "status", st);
        }
        json_t *conds = json_object_get(st, "conditions");
        if (!json_is_array(conds)) {
            conds = json_array();
            json_object_set_new(st, "conditions", conds);
        }
        size_t i, j;
        json_t *pc, *c;
        json_array_foreach(json_object_get(pst, "conditions"), i, pc)
        {
            const char *type = json_string_value(json_object_get(pc, "type"));
            json_t *into = NULL;
            json_array_foreach(conds, j, c)
            {
                const char *t = json_string_value(json_object_get(c, "type"));
                if (type && t && !strcmp(type, t))
                    into = c;
            }
            if (!into) {
                into = json_object();
                json_array_append_new(conds, into);
            }
            merge_patch(into, pc);
        }
        json_object_del(pst, "conditions");
        merge_patch(st, pst);
        ok = store_and_send(s, fd, STUB_POD, pod, 200);
    }
    json_decref(pod);
    json_decref(b);
    return ok;
}

/* serve_merge_patch applies a merge patch to object name of kind: with
 * status, only the patch's status is taken (the status subresource);
 * without, everything but status, as the main resource of a kind with a
 * status subresource ignores it. */
static bool serve_merge_patch(k8s_stub *s, int fd, int kind, const char *name, bool status,
                              const char *body)
{
    json_t *b = json_loads(body, 0, NULL);
    if (!json_is_object(b)) {
        json_decref(b);
        return send_status(fd, 400, "BadRequest", "not a JSON object");
    }
    pthread_mutex_lock(&s->mu);
    json_t *obj = json_deep_copy(json_object_get(s->objs[kind], name));
    pthread_mutex_unlock(&s->mu);
    bool ok;
    if (!obj) {
        char m[512];
        snprintf(m, sizeof m, "%s \"%s\" not found", kind == STUB_NODE ? "nodes" : "nodeshards",
                 name);
        ok = send_status(fd, 404, "NotFound", m);
    } else {
        if (status) {
            json_t *st = json_incref(json_object_get(b, "status"));
            json_object_clear(b);
            if (st)
                json_object_set_new(b, "status", st);
        } else {
            json_object_del(b, "status");
        }
        merge_patch(obj, b);
        ok = store_and_send(s, fd, kind, obj, 200);
    }
    json_decref(obj);
    json_decref(b);
    return ok;
}

/* serve_create stores a new object of kind from body: 409 AlreadyExists
 * when one of that name is there. */
static bool serve_create(k8s_stub *s, int fd, int kind, const char *body)
{
    json_t *b = json_loads(body, 0, NULL);
    const char *name = json_string_value(json_object_get(json_object_get(b, "metadata"), "name"));
    bool ok;
    if (!name) {
        ok = send_status(fd, 422, "Invalid", "metadata.name: Required value");
    } else {
        pthread_mutex_lock(&s->mu);
        bool exists = json_object_get(s->objs[kind], name) != NULL;
        pthread_mutex_unlock(&s->mu);
        if (exists) {
            char m[512];
            snprintf(m, sizeof m, "nodeshards.shard.volcano.sh \"%s\" already exists", name);
            ok = send_status(fd, 409, "AlreadyExists", m);
        } else {
            ok = store_and_send(s, fd, kind, b, 201);
        }
    }
    json_decref(b);
    return ok;
}

static bool same_rv(const json_t *md_a, const json_t *md_b)
{
    const char *a = json_string_value(json_object_get(md_a, "resourceVersion"));
    const char *b = json_string_value(json_object_get(md_b, "resourceVersion"));
    return a && b && strcmp(a, b) == 0;
}

/* Leases: GET, POST (create: 409 AlreadyExists), PUT (409 Conflict when
 * metadata.resourceVersion is not the stored one), as the API server's
 * optimistic concurrency. name "" = the collection (POST). */
static bool serve_lease(k8s_stub *s, int fd, const char *method, const char *ns, const char *name,
                        const char *body)
{
    json_t *in = NULL;
    char key[600], *out = NULL;
    int code = 0;
    const char *reason = "", *msg = "";
    if (strcmp(method, "GET") != 0) {
        in = json_loads(body ? body : "", 0, NULL);
        const char *n = json_string_value(json_object_get(json_object_get(in, "metadata"), "name"));
        if (!in || !n) {
            json_decref(in);
            return send_status(fd, 400, "BadRequest", "not a Lease");
        }
        if (!*name)
            name = n;
    }
    snprintf(key, sizeof key, "%s/%s", ns, name);
    pthread_mutex_lock(&s->mu);
    json_t *cur = json_object_get(s->leases, key);
    if (!strcmp(method, "GET")) {
        if (cur)
            out = json_dumps(cur, JSON_COMPACT), code = 200;
        else
            code = 404, reason = "NotFound", msg = "leases.coordination.k8s.io not found";
    } else if (!strcmp(method, "POST") && cur) {
        code = 409, reason = "AlreadyExists", msg = "leases.coordination.k8s.io already exists";
    } else if (!strcmp(method, "PUT") && !cur) {
        code = 404, reason = "NotFound", msg = "leases.coordination.k8s.io not found";
    } else if (!strcmp(method, "PUT") &&
               !same_rv(json_object_get(in, "metadata"), json_object_get(cur, "metadata"))) {
        code = 409, reason = "Conflict",
        msg = "Operation cannot be fulfilled on leases.coordination.k8s.io: the object has been "
              "modified; please apply your changes to the latest version and try again";
    } else if (!strcmp(method, "POST") || !strcmp(method, "PUT")) {
        set_rv(in, ++s->rv);
        json_object_set(s->leases, key, in);
        out = json_dumps(in, JSON_COMPACT);
        code = !strcmp(method, "POST") ? 201 : 200;
    } else {
        code = 405, reason = "MethodNotAllowed", msg = "method not allowed";
    }
    pthread_mutex_unlock(&s->mu);
    json_decref(in);
    bool ok = out ? send_response(fd, code, out) : send_status(fd, code, reason, msg);
    free(out);
    return ok;
}

/* See k8s_stub.h. */
json_t *stub_object(k8s_stub *s, int kind, const char *key)
{
    pthread_mutex_lock(&s->mu);
    json_t *o = json_deep_copy(json_object_get(s->objs[kind], key));
    pthread_mutex_unlock(&s->mu);
    return o;
}

char *stub_filler(size_t n)
{
    char *f = malloc(n + 1);
    if (f) {
        memset(f, 'x', n);
        f[n] = 0;
    }
    return f;
}

bool stub_write_kubeconfig(k8s_stub *s, const char *path)
{
    FILE *fp = fopen(path, "w");
    if (!fp)
        return false;
    fprintf(fp,
            "apiVersion: v1\nkind: Config\ncurrent-context: stub\nclusters:\n- name: stub\n"
            "  cluster:\n    server: %s\ncontexts:\n- name: stub\n  context:\n    cluster: stub\n"
            "    user: u\nusers:\n- name: u\n  user:\n    token: secret\n",
            stub_url(s));
    return fclose(fp) == 0;
}

/* put_namespaced stores a copy of obj in map under "ns/name" with a new
 * resourceVersion. */
static void put_namespaced(k8s_stub *s, json_t *map, const char *ns, const char *name, json_t *obj)
{
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    json_t *own = json_deep_copy(obj);
    pthread_mutex_lock(&s->mu);
    set_rv(own, ++s->rv);
    json_object_set_new(map, key, own);
    pthread_mutex_unlock(&s->mu);
}

void stub_put_lease(k8s_stub *s, const char *ns, const char *name, json_t *obj)
{
    put_namespaced(s, s->leases, ns, name, obj);
}

void stub_put_configmap(k8s_stub *s, const char *ns, const char *name, json_t *obj)
{
    put_namespaced(s, s->configmaps, ns, name, obj);
}

json_t *stub_lease(k8s_stub *s, const char *ns, const char *name)
{
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    pthread_mutex_lock(&s->mu);
    json_t *l = json_deep_copy(json_object_get(s->leases, key));
    pthread_mutex_unlock(&s->mu);
    return l;
}

static bool handle_request(k8s_stub *s, stub_conn *cn, const char *method, const char *target,
                           const char *body)
{
    int fd = cn->fd;
    char path[1024];
    const char *q = strchr(target, '?');
    size_t pl = q ? (size_t)(q - target) : strlen(target);
    if (pl >= sizeof path)
        pl = sizeof path - 1;
    memcpy(path, target, pl);
    path[pl] = 0;
    const char *query = q ? q + 1 : NULL;
    char wb[16];
    bool watch = query_get(query, "watch", wb, sizeof wb) && !strcmp(wb, "true");
    stub_req type = !strcmp(method, "POST")    ? STUB_POST
                    : !strcmp(method, "PATCH") ? STUB_PATCH
                    : watch                    ? STUB_WATCH
                                               : STUB_LIST;
    stub_faultq f = {0};
    pthread_mutex_lock(&s->mu);
    if (s->nreq < 4096) {
        snprintf(s->reqlog[s->nreq].prefix, sizeof s->reqlog[0].prefix, "%s", path);
        s->reqlog[s->nreq].type = type;
        s->nreq++;
    }
    bool have_f = take_fault(s, path, type, &f);
    bool shards = s->shards_installed;
    pthread_mutex_unlock(&s->mu);
    if (have_f) {
        switch (f.f) {
        case STUB_F_STATUS:
            return send_status(fd, f.arg, f.arg == 429 ? "TooManyRequests" : "InternalError",
                               "injected fault");
        case STUB_F_RETRY_AFTER: {
            char hdr[64];
            snprintf(hdr, sizeof hdr, "Retry-After: %d\r\n", f.arg);
            return send_response_hdr(fd, 429, hdr,
                                     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
                                     "\"Failure\",\"reason\":\"TooManyRequests\",\"code\":429,"
                                     "\"message\":\"too many requests, please try again later\"}");
        }
        case STUB_F_CLOSE:
            return false;
        case STUB_F_SLOW:
            sleep_ms(f.arg);
            break;
        default:
            break;
        }
    }
    int kind = -1;
    for (int i = 0; i < STUB__KINDS; i++)
        if (!strcmp(path, stub_paths[i]))
            kind = i;
    if (kind == STUB_SHARD && !shards)
        return send_status(fd, 404, "NotFound", "the server could not find the requested resource");
    if (kind >= 0 && type == STUB_LIST)
        return serve_list(s, fd, kind, query, have_f && f.f == STUB_F_EXPIRE_CONTINUE);
    if (kind >= 0 && type == STUB_WATCH)
        return serve_watch(s, cn, kind, query, have_f, f);
    char ns[256], name[256];
    char rest[8];
    if (type == STUB_LIST &&
        sscanf(path, "/api/v1/namespaces/%255[^/]/pods/%255[^/]%7s", ns, name, rest) == 2) {
        pthread_mutex_lock(&s->mu);
        const char *key = pod_key(s, ns, name);
        char *b = key ? json_dumps(json_object_get(s->objs[STUB_POD], key), JSON_COMPACT) : NULL;
        pthread_mutex_unlock(&s->mu);
        bool ok = b ? send_response(fd, 200, b) : send_status(fd, 404, "NotFound", "pod not found");
        free(b);
        return ok;
    }
    if (type == STUB_PATCH &&
        sscanf(path, "/api/v1/namespaces/%255[^/]/pods/%255[^/]%7s", ns, name, rest) == 2)
        return serve_pod_patch(s, fd, ns, name, body);
    if (type == STUB_PATCH &&
        sscanf(path, "/api/v1/namespaces/%255[^/]/pods/%255[^/]/%7s", ns, name, rest) == 3 &&
        !strcmp(rest, "status"))
        return serve_pod_status_patch(s, fd, ns, name, body);
    if (type == STUB_PATCH && sscanf(path, "/api/v1/nodes/%255[^/]/%7s", name, rest) == 2 &&
        !strcmp(rest, "status"))
        return serve_merge_patch(s, fd, STUB_NODE, name, true, body);
    if (shards && type == STUB_PATCH) {
        rest[0] = 0;
        if (sscanf(path, "/apis/shard.volcano.sh/v1alpha1/nodeshards/%255[^/]%7s", name, rest) >= 1)
            return serve_merge_patch(s, fd, STUB_SHARD, name, !strcmp(rest, "/status"), body);
    }
    if (shards && type == STUB_POST && kind == STUB_SHARD)
        return serve_create(s, fd, STUB_SHARD, body);
    if (type == STUB_POST &&
        sscanf(path, "/api/v1/namespaces/%255[^/]/pods/%255[^/]/binding", ns, name) == 2)
        return serve_binding(s, fd, ns, name, body, !(have_f && f.f == STUB_F_APPLY_CLOSE));
    if (sscanf(path, "/apis/coordination.k8s.io/v1/namespaces/%255[^/]/leases/%255[^/]%7s", ns,
               name, rest) == 2)
        return serve_lease(s, fd, method, ns, name, body);
    if (sscanf(path, "/apis/coordination.k8s.io/v1/namespaces/%255[^/]/leases%7s", ns, rest) == 1)
        return serve_lease(s, fd, method, ns, "", body);
    if (type == STUB_LIST &&
        sscanf(path, "/api/v1/namespaces/%255[^/]/configmaps/%255[^/]%7s", ns, name, rest) == 2) {
        char key[600];
        snprintf(key, sizeof key, "%s/%s", ns, name);
        pthread_mutex_lock(&s->mu);
        json_t *cm = json_object_get(s->configmaps, key);
        char *b = cm ? json_dumps(cm, JSON_COMPACT) : NULL;
        pthread_mutex_unlock(&s->mu);
        bool ok = b ? send_response(fd, 200, b)
                    : send_status(fd, 404, "NotFound", "configmaps not found");
        free(b);
        return ok;
    }
    if (type == STUB_POST && sscanf(path, "/api/v1/namespaces/%255[^/]/events", ns) == 1) {
        json_t *e = json_loads(body, 0, NULL);
        pthread_mutex_lock(&s->mu);
        s->events_posted++;
        json_decref(s->last_event);
        s->last_event = e;
        pthread_mutex_unlock(&s->mu);
        return send_response(fd, 201, body);
    }
    if (type == STUB_LIST && !strcmp(path, "/version"))
        return send_response(fd, 200,
                             "{\"major\":\"1\",\"minor\":\"36\",\"gitVersion\":\"v1.36.0\"}");
    return send_status(fd, 404, "NotFound", "no such path");
}

static void *conn_main(void *arg)
{
    stub_conn *cn = arg;
    k8s_stub *s = cn->s;
    size_t cap = 1 << 20, len = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        char *hend = NULL;
        while (!(hend = (len ? strstr(b, "\r\n\r\n") : NULL))) {
            if (len == cap)
                goto out;
            ssize_t r = recv(cn->fd, b + len, cap - len, 0);
            if (r <= 0)
                goto out;
            len += (size_t)r;
            b[len] = 0;
        }
        size_t hl = (size_t)(hend - b) + 4;
        char method[16], target[2048];
        if (sscanf(b, "%15s %2047s", method, target) != 2)
            goto out;
        size_t clen = 0;
        const char *cl = strcasestr(b, "\r\nContent-Length:");
        if (cl && cl < hend)
            clen = strtoul(cl + 17, NULL, 10);
        if (hl + clen > cap)
            goto out;
        while (len < hl + clen) {
            ssize_t r = recv(cn->fd, b + len, cap - len, 0);
            if (r <= 0)
                goto out;
            len += (size_t)r;
            b[len] = 0;
        }
        const char *au = strcasestr(b, "\r\nAuthorization:");
        if (au && au < hend) {
            au += 16;
            while (*au == ' ')
                au++;
            size_t al = strcspn(au, "\r");
            pthread_mutex_lock(&s->mu);
            snprintf(s->last_auth, sizeof s->last_auth, "%.*s", (int)al, au);
            pthread_mutex_unlock(&s->mu);
        }
        char *body = strndup(b + hl, clen);
        memmove(b, b + hl + clen, len - hl - clen);
        len -= hl + clen;
        b[len] = 0;
        bool ok = handle_request(s, cn, method, target, body);
        free(body);
        if (!ok)
            break;
    }
out:
    free(b);
    pthread_mutex_lock(&s->mu);
    shutdown(cn->fd, SHUT_RDWR);
    close(cn->fd);
    cn->done = true;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void *accept_main(void *arg)
{
    k8s_stub *s = arg;
    for (;;) {
        struct pollfd p = {s->lfd, POLLIN, 0};
        int r = poll(&p, 1, 50);
        pthread_mutex_lock(&s->mu);
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        if (r <= 0)
            continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_mutex_lock(&s->mu);
        if (s->nconns == STUB_MAX_CONNS) {
            pthread_mutex_unlock(&s->mu);
            close(fd);
            continue;
        }
        stub_conn *cn = &s->conns[s->nconns++];
        cn->s = s;
        cn->fd = fd;
        cn->used = true;
        pthread_create(&cn->th, NULL, conn_main, cn);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

k8s_stub *stub_new(void)
{
    k8s_stub *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    for (int i = 0; i < STUB__KINDS; i++)
        s->objs[i] = json_object();
    s->leases = json_object();
    s->configmaps = json_object();
    s->rv = 100;
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->lfd, 128) != 0) {
        perror("stub bind");
        abort();
    }
    socklen_t al = sizeof a;
    getsockname(s->lfd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%u", s->port);
    pthread_create(&s->accept_th, NULL, accept_main, s);
    return s;
}

const char *stub_url(k8s_stub *s)
{
    return s->url;
}

void stub_free(k8s_stub *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    for (int i = 0; i < s->nconns; i++)
        if (!s->conns[i].done)
            shutdown(s->conns[i].fd, SHUT_RDWR);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->accept_th, NULL);
    for (int i = 0; i < s->nconns; i++)
        pthread_join(s->conns[i].th, NULL);
    close(s->lfd);
    for (int i = 0; i < STUB__KINDS; i++)
        json_decref(s->objs[i]);
    for (size_t i = 0; i < s->nlog; i++)
        json_decref(s->log[i].obj);
    free(s->log);
    for (int i = 0; i < s->nsnaps; i++)
        json_decref(s->snaps[i].items);
    json_decref(s->last_event);
    json_decref(s->leases);
    json_decref(s->configmaps);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cond);
    free(s);
}
