/*
 * bench_transport.c - the per-pod API calls' transports against a real API
 * server: Bindings over HTTP/1.1 kept handles (one connection per thread,
 * the bind path), each request through libcurl's curl_easy_perform or
 * framed by agentsched on the wire (wire.h), against the call loop (mux.h:
 * one libcurl multi handle, HTTP/2 streams of one TLS connection).
 *
 *   bench_transport KUBECONFIG [PODS [THREADS [ROUNDS]]]
 *                   (default 1000 pods, 32 threads, 2 rounds)
 *
 * Needs a running cluster with at least one node (a dev-cluster: its
 * state directory's kubeconfig). Per round and transport it creates PODS
 * pods in namespace default (schedulerName bench-transport-none, so no
 * scheduler takes them; untimed), then times binding all of them to the
 * first node, then deletes them (untimed). Rows:
 *   h1-curl     THREADS threads, each with its own kept handle and
 *               keep-alive HTTP/1.1 connection, k8s_do_kept per Binding
 *               through curl_easy_perform (the bind path before the wire)
 *   h1-wire     the same kept handles, requests framed on the wire (the
 *               bind and Event path)
 *   loop-sync   THREADS threads handing the same Binding to the call loop
 *               and waiting for its answer (k8s_mux_do): the loop under the
 *               fast path's bind threads
 *   loop-async  one thread submitting to the call loop, THREADS in flight
 * Prints, per row, binds/s and this process's CPU (user + system) per
 * bind, and the ratios of each row to h1-curl over all rounds.
 * Client CPU is the whole process's: nothing else runs in it. The kept
 * handles and the loop open their connections before the first row.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "agentsched/base/log.h"
#include "agentsched/core/cache.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/mux.h"
#include "agentsched/k8s/transport.h"
#include "agentsched/model/registry.h"
#include "bench_clock.h"

enum { ROW_H1, ROW_WIRE, ROW_SYNC, ROW_ASYNC, NROWS };
static const char *const row_name[NROWS] = {"h1-curl", "h1-wire", "loop-sync", "loop-async"};

typedef struct bench {
    k8s_client *k;
    k8s_mux *mux;
    int pods, threads;
    char node[256];
    char prefix[64];
    int next;     /* (atomic) next pod index */
    int tindex;   /* (atomic) next thread index */
    k8s_kept *h1; /* the h1 threads' handles, kept warm across rows and rounds */
    int failed;
} bench;

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void binding_body(const bench *b, int i, char *body, size_t n, char *path, size_t pn)
{
    snprintf(path, pn, "/api/v1/namespaces/default/pods/%s%d/binding", b->prefix, i);
    snprintf(body, n,
             "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"%s%d\","
             "\"namespace\":\"default\"},\"target\":{\"kind\":\"Node\",\"name\":\"%s\"}}",
             b->prefix, i, b->node);
}

/* create_main / h1_main: each thread takes pod indexes until none is left. */
static void *create_main(void *arg)
{
    bench *b = arg;
    CURL *h = curl_easy_init();
    buf resp;
    buf_init(&resp, 1 << 20);
    char body[1024];
    for (int i; (i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED)) < b->pods;) {
        snprintf(body, sizeof body,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s%d\","
                 "\"labels\":{\"bench-transport\":\"1\"}},\"spec\":{\"schedulerName\":"
                 "\"bench-transport-none\",\"containers\":[{\"name\":\"c\",\"image\":"
                 "\"registry.invalid/bench\"}]}}",
                 b->prefix, i);
        long st = 0;
        as_diag d = {{0}, {0}};
        buf_reset(&resp);
        if (k8s_do(b->k, h, "POST", "/api/v1/namespaces/default/pods", body, strlen(body), &resp,
                   &st, &d) ||
            st != 201) {
            fprintf(stderr, "create %s%d: %ld %s\n", b->prefix, i, st, d.msg);
            __atomic_add_fetch(&b->failed, 1, __ATOMIC_RELAXED);
        }
    }
    buf_free(&resp);
    curl_easy_cleanup(h);
    return NULL;
}

/* h1_main: via_curl set on the handles beforehand picks the row */
static void *h1_main(void *arg)
{
    bench *b = arg;
    k8s_kept *h = &b->h1[__atomic_fetch_add(&b->tindex, 1, __ATOMIC_RELAXED)];
    char body[1024], path[512];
    for (int i; (i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED)) < b->pods;) {
        binding_body(b, i, body, sizeof body, path, sizeof path);
        long st = 0;
        int64_t ra = 0;
        unsigned sends = 0;
        as_diag d = {{0}, {0}};
        buf_reset(&h->resp);
        if (k8s_do_kept(b->k, h, path, body, strlen(body), &h->resp, &st, &ra, &sends, &d) ||
            st != 201)
            __atomic_add_fetch(&b->failed, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* warm_main opens each h1 thread's connections (libcurl's and the
 * wire's, with a POST each that the API server refuses), and the call
 * loop's, so that no row pays TLS handshakes. */
static void *warm_main(void *arg)
{
    bench *b = arg;
    int t = __atomic_fetch_add(&b->tindex, 1, __ATOMIC_RELAXED);
    buf resp;
    buf_init(&resp, 1 << 20);
    long st = 0;
    as_diag d = {{0}, {0}};
    for (int via_curl = 0; via_curl < 2; via_curl++) {
        b->h1[t].via_curl = via_curl;
        k8s_do_kept(b->k, &b->h1[t], "/api/v1/namespaces/default/pods/bt-warm/binding", "{}", 2,
                    &resp, &st, NULL, NULL, &d);
    }
    k8s_call c = {.method = "GET", .path = "/api/v1/nodes?limit=1", .resp = &resp};
    buf_reset(&resp);
    k8s_mux_do(b->mux, &c, &d);
    if (t == 0)
        printf("call loop's protocol: %s\n", c.http_version == CURL_HTTP_VERSION_2_0   ? "HTTP/2"
                                             : c.http_version == CURL_HTTP_VERSION_1_1 ? "HTTP/1.1"
                                                                                       : "other");
    buf_free(&resp);
    return NULL;
}

static void *sync_main(void *arg)
{
    bench *b = arg;
    buf resp;
    buf_init(&resp, 256 << 10);
    char body[1024], path[512];
    for (int i; (i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED)) < b->pods;) {
        binding_body(b, i, body, sizeof body, path, sizeof path);
        as_diag d = {{0}, {0}};
        buf_reset(&resp);
        k8s_call c = {.method = "POST",
                      .path = path,
                      .body = body,
                      .body_len = strlen(body),
                      .resp = &resp,
                      .limited = true};
        if (k8s_mux_do(b->mux, &c, &d) || c.status != 201)
            __atomic_add_fetch(&b->failed, 1, __ATOMIC_RELAXED);
    }
    buf_free(&resp);
    return NULL;
}

/* The asynchronous row: a window of THREADS calls, refilled from the
 * completions. */
typedef struct acall {
    k8s_call c;
    char body[512], path[256];
    buf resp;
    sem_t *window;
    bench *b;
} acall;

static long async_version; /* the last answer's HTTP version */

static void async_done(k8s_call *c)
{
    acall *a = c->arg;
    async_version = c->http_version;
    if (c->cc != CURLE_OK || c->status != 201)
        __atomic_add_fetch(&a->b->failed, 1, __ATOMIC_RELAXED);
    sem_post(a->window);
}

static void run_async(bench *b)
{
    sem_t window;
    sem_init(&window, 0, 0);
    acall *calls = calloc((size_t)b->pods, sizeof *calls);
    for (int i = 0; i < b->pods; i++) {
        if (i >= b->threads)
            sem_wait(&window);
        acall *a = &calls[i];
        a->b = b;
        a->window = &window;
        buf_init(&a->resp, 256 << 10);
        binding_body(b, i, a->body, sizeof a->body, a->path, sizeof a->path);
        a->c = (k8s_call){.method = "POST",
                          .path = a->path,
                          .body = a->body,
                          .body_len = strlen(a->body),
                          .resp = &a->resp,
                          .limited = true,
                          .done = async_done,
                          .arg = a};
        k8s_mux_submit(b->mux, &a->c);
    }
    for (int i = 0; i < (b->pods < b->threads ? b->pods : b->threads); i++)
        sem_wait(&window);
    for (int i = 0; i < b->pods; i++)
        buf_free(&calls[i].resp);
    free(calls);
    sem_destroy(&window);
}

static void run_threads(bench *b, void *(*fn)(void *))
{
    pthread_t *t = calloc((size_t)b->threads, sizeof *t);
    __atomic_store_n(&b->next, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&b->tindex, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < b->threads; i++)
        pthread_create(&t[i], NULL, fn, b);
    for (int i = 0; i < b->threads; i++)
        pthread_join(t[i], NULL);
    free(t);
}

static void delete_pods(bench *b)
{
    long st = 0;
    buf resp;
    buf_init(&resp, 64 << 20);
    as_diag d = {{0}, {0}};
    k8s_request(b->k, "DELETE",
                "/api/v1/namespaces/default/pods?labelSelector=bench-transport%3D1"
                "&gracePeriodSeconds=0",
                NULL, 0, &resp, &st, &d);
    if (st != 200)
        fprintf(stderr, "delete: %ld %s\n", st, d.msg);
    buf_free(&resp);
}

static int first_node(bench *b)
{
    long st = 0;
    buf resp;
    buf_init(&resp, 1 << 20);
    as_diag d = {{0}, {0}};
    k8s_request(b->k, "GET", "/api/v1/nodes?limit=1", NULL, 0, &resp, &st, &d);
    int rc = -1;
    const char *p = resp.data ? strstr(resp.data, "\"items\":[{\"metadata\":{\"name\":\"") : NULL;
    if (st == 200 && p) {
        p += strlen("\"items\":[{\"metadata\":{\"name\":\"");
        const char *q = strchr(p, '"');
        if (q && (size_t)(q - p) < sizeof b->node) {
            memcpy(b->node, p, (size_t)(q - p));
            b->node[q - p] = 0;
            rc = 0;
        }
    }
    if (rc)
        fprintf(stderr, "no node found (%ld %s)\n", st, d.msg);
    buf_free(&resp);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_transport KUBECONFIG [PODS [THREADS [ROUNDS]]]\n");
        return 2;
    }
    log_set_level(LOG_WARN);
    bench b = {0};
    b.pods = argc > 2 ? atoi(argv[2]) : 1000;
    b.threads = argc > 3 ? atoi(argv[3]) : 32;
    int rounds = argc > 4 ? atoi(argv[4]) : 2;
    if (b.pods < 1 || b.threads < 1 || rounds < 1)
        return 2;
    model_registry reg;
    model_registry_init(&reg);
    cache *c = NULL;
    as_diag d = {{0}, {0}};
    k8s_config cfg;
    k8s_config_defaults(&cfg);
    cfg.kubeconfig = argv[1];
    cfg.qps = 0; /* unlimited: the transports, not the limiter */
    cfg.bind_concurrency = (size_t)b.threads;
    if (cache_new(&reg, &c) || k8s_client_new(&cfg, c, &b.k, &d) || k8s_mux_new(b.k, &b.mux)) {
        fprintf(stderr, "bench_transport: %s\n", d.msg);
        return 1;
    }
    if (first_node(&b))
        return 1;
    b.h1 = calloc((size_t)b.threads, sizeof *b.h1);
    for (int i = 0; i < b.threads; i++)
        if (k8s_kept_init(&b.h1[i], 256 << 10))
            return 1;
    run_threads(&b, warm_main);
    printf("bench_transport: %d pods per row, %d threads / calls in flight, %d rounds, node %s\n",
           b.pods, b.threads, rounds, b.node);
    printf("%-11s %5s %9s %12s %8s\n", "row", "round", "binds/s", "CPU us/bind", "failed");
    double sum_wall[NROWS] = {0}, sum_cpu[NROWS] = {0};
    delete_pods(&b);
    for (int r = 0; r < rounds; r++) {
        for (int row = 0; row < NROWS; row++) {
            snprintf(b.prefix, sizeof b.prefix, "bt-%d-%d-", r, row);
            __atomic_store_n(&b.failed, 0, __ATOMIC_RELAXED);
            run_threads(&b, create_main);
            int cfail = b.failed;
            __atomic_store_n(&b.failed, 0, __ATOMIC_RELAXED);
            double w0 = bench_now_s(), c0 = cpu_s();
            if (row == ROW_H1 || row == ROW_WIRE) {
                for (int i = 0; i < b.threads; i++)
                    b.h1[i].via_curl = row == ROW_H1;
                run_threads(&b, h1_main);
            } else if (row == ROW_SYNC)
                run_threads(&b, sync_main);
            else
                run_async(&b);
            double wall = bench_now_s() - w0, cpu = cpu_s() - c0;
            sum_wall[row] += wall;
            sum_cpu[row] += cpu;
            printf("%-11s %5d %9.0f %12.1f %8d%s\n", row_name[row], r + 1, b.pods / wall,
                   cpu / b.pods * 1e6, b.failed, cfail ? " (creates failed)" : "");
            fflush(stdout);
            delete_pods(&b);
        }
    }
    printf("over all rounds (ratio to h1-curl: binds/s higher is better, CPU/bind lower):\n");
    for (int row = 0; row < NROWS; row++)
        printf("  %-11s %9.0f binds/s %8.1f CPU us/bind   binds/s x%.2f   CPU/bind x%.2f\n",
               row_name[row], rounds * b.pods / sum_wall[row], sum_cpu[row] / rounds / b.pods * 1e6,
               sum_wall[ROW_H1] / sum_wall[row], sum_cpu[row] / sum_cpu[ROW_H1]);
    for (int i = 0; i < b.threads; i++)
        k8s_kept_fini(&b.h1[i]);
    free(b.h1);
    k8s_mux_free(b.mux);
    k8s_client_free(b.k);
    cache_free(c);
    model_registry_destroy(&reg);
    return 0;
}
