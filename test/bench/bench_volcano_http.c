/*
 * bench_volcano_http.c - server CPU per Volcano predicate call over the
 * real HTTP stack, under Volcano's connection pattern, against /healthz
 * under the same pattern in the same run; and prioritize at 1,000 and
 * 5,000 realistic nodes.
 *
 * A child process runs the server (svc_http_start, plain HTTP, the
 * sidecar's 2 pool threads, 5000 nodes in the cache as bench_bodies.h
 * builds them). The parent sends N calls from 16 threads, each call on a
 * new TCP connection (what Volcano's Go client does past its 2 idle
 * connections a host), and reads the child's process CPU time
 * (CLOCK_PROCESS_CPUTIME_ID, asked over a pipe) before and after each
 * phase. Bodies are what vc-scheduler marshals: PredicateRequest {"task":
 * TaskInfo with the Pod as a real cluster has it (bench_k8s_pod_json),
 * "node": NodeInfo with a kubelet-like v1.Node (5 conditions, addresses,
 * nodeInfo, labels, 50 images) and Volcano's own resource fields and
 * image states}. Every predicate names one of 64 tasks (the memo's repeat
 * case: Volcano asks for the same task on node after node) and the node
 * cycles through the cache.
 *
 * prioritize sends the same task with 500, 1,000 and 5,000 such NodeInfos
 * (the child's --max-body raised to fit): the wall time of each call and
 * the server CPU per call.
 *
 * Usage: bench_volcano_http [calls] [predicate|prioritize|all]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"
#include "bench_bodies.h"
#include "bench_clock.h"

#define PARALLEL 16
#define NTASKS   64
#define ROUNDS   5

/* ------------------------------------------------------------------ */
/* Bodies                                                              */
/* ------------------------------------------------------------------ */

/* vc_resource appends a Volcano api.Resource. */
static void vc_resource(buf *b, long mcpu, long long mem)
{
    buf_printf(b,
               "{\"MilliCPU\":%ld,\"Memory\":%lld,\"ScalarResources\":{\"ephemeral-storage\":"
               "204010946560000,\"hugepages-1Gi\":0,\"hugepages-2Mi\":0,\"pods\":110000},"
               "\"MaxTaskNum\":110}",
               mcpu, mem);
}

/* vc_node_info appends node i as Volcano's NodeInfo marshals. */
static void vc_node_info(buf *b, int i)
{
    buf node;
    buf_init(&node, 0);
    bench_node_json(&node, i, true);
    /* the full node ends "...}}}" (nodeInfo, status, node): add images */
    node.len -= 2;
    buf_puts(&node, ",\"images\":[");
    for (int k = 0; k < 50; k++)
        buf_printf(&node,
                   "%s{\"names\":[\"registry.example.com/team-%d/service-%d@sha256:"
                   "4f9c2b7e1d0a3c5b8e6f7a9d2c1b0e3f5a7c9e1b3d5f7a9c0e2b4d6f8a1c3e5%02d\","
                   "\"registry.example.com/team-%d/service-%d:v1.%d.%d\"],\"sizeBytes\":%d}",
                   k ? "," : "", k % 7, k, k, k % 7, k, k % 5, k, 20000000 + k * 1234567);
    buf_puts(&node, "]}}");
    buf_printf(b, "{\"Name\":\"node-%05d\",\"Node\":", i);
    buf_append(b, node.data, node.len);
    buf_puts(b, ",\"State\":{\"Phase\":\"Ready\",\"Reason\":\"\"},\"Releasing\":");
    vc_resource(b, 0, 0);
    buf_puts(b, ",\"Pipelined\":");
    vc_resource(b, 0, 0);
    buf_puts(b, ",\"Idle\":");
    vc_resource(b, 29500, 125LL << 30);
    buf_puts(b, ",\"Used\":");
    vc_resource(b, 2000, 4LL << 30);
    buf_puts(b, ",\"Allocatable\":");
    vc_resource(b, 31500, 125LL << 30);
    buf_puts(b, ",\"Capacity\":");
    vc_resource(b, 32000, 128LL << 30);
    buf_puts(b, ",\"ResourceUsage\":{\"CPUUsageAvg\":{},\"MEMUsageAvg\":{}},\"Tasks\":{},"
                "\"NumaInfo\":null,\"UnassignedNumaPods\":{},\"NumaSchedulerInfo\":null,"
                "\"RevocableZone\":\"\",\"Others\":{},\"OversubscriptionNode\":false,"
                "\"OfflineJobEvicting\":false,\"OversubscriptionResource\":");
    vc_resource(b, 0, 0);
    buf_puts(b, ",\"ImageStates\":{");
    for (int k = 0; k < 50; k++)
        buf_printf(b,
                   "%s\"registry.example.com/team-%d/service-%d:v1.%d.%d\":{\"Size\":%d,"
                   "\"NumNodes\":%d}",
                   k ? "," : "", k % 7, k, k % 5, k, 20000000 + k * 1234567, 100 + k);
    buf_printf(b, "},\"Generation\":%d,\"BindGeneration\":%d}", 1000 + i, 10 + i);
    buf_free(&node);
}

/* vc_task appends task id as Volcano's TaskInfo marshals (its Pod as a
 * real cluster's informer has it). */
static void vc_task(buf *b, int id)
{
    buf_printf(b,
               "{\"UID\":\"6f1c2a4e-0000-4000-8000-%012d\",\"Job\":\"agents/pg-%d\",\"Name\":"
               "\"agent-7d9f8-%d\",\"Namespace\":\"agents\",\"TaskRole\":\"\",\"Resreq\":",
               id, id, id);
    vc_resource(b, 550, 1140850688);
    buf_puts(b, ",\"InitResreq\":");
    vc_resource(b, 550, 1140850688);
    buf_puts(b, ",\"NodeName\":\"\",\"EvictionOccurred\":false,\"Status\":1,\"Priority\":0,"
                "\"VolumeReady\":false,\"Preemptable\":false,\"BestEffort\":false,"
                "\"HasRestartableInitContainer\":false,\"SchGated\":false,\"RevocableZone\":\"\","
                "\"NumaInfo\":null,\"PodVolumes\":null,\"Pod\":");
    bench_k8s_pod_json(b, (uint64_t)id);
    buf_puts(b, ",\"CustomBindErrHandler\":null,\"CustomBindErrHandlerSucceeded\":false,"
                "\"LastTransaction\":null,\"LastTx\":null,\"NumaAllocation\":null}");
}

static char *predicate_body(int task, int node)
{
    buf b;
    buf_init(&b, 0);
    buf_puts(&b, "{\"task\":");
    vc_task(&b, task);
    buf_puts(&b, ",\"node\":");
    vc_node_info(&b, node);
    buf_puts(&b, "}");
    char *out;
    size_t len;
    buf_take(&b, &out, &len);
    return out;
}

static char *prioritize_body(int task, int nodes)
{
    buf b;
    buf_init(&b, (size_t)1 << 30);
    buf_puts(&b, "{\"task\":");
    vc_task(&b, task);
    buf_puts(&b, ",\"nodes\":[");
    for (int i = 0; i < nodes; i++) {
        if (i)
            buf_puts(&b, ",");
        vc_node_info(&b, (i * 7919) % BENCH_NODES);
    }
    buf_puts(&b, "]}");
    char *out;
    size_t len;
    buf_take(&b, &out, &len);
    return out;
}

/* ------------------------------------------------------------------ */
/* The server child                                                    */
/* ------------------------------------------------------------------ */

typedef struct child {
    pid_t pid;
    int cmd, reply; /* pipes: parent writes a byte, child answers its CPU ns */
    uint16_t port;
} child;

static void child_main(int cmd, int reply, size_t max_body)
{
    log_set_level(LOG_ERROR);
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.log_level = 0;
    cfg.listen = "127.0.0.1:0";
    cfg.http_threads = 2;
    if (max_body)
        cfg.max_body = max_body;
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    if (svc_new(&cfg, &s, &d) != AS_OK) {
        fprintf(stderr, "svc_new: %s\n", d.msg);
        _exit(1);
    }
    bench_load_cluster(s);
    if (svc_http_start(s, &d) != AS_OK) {
        fprintf(stderr, "svc_http_start: %s\n", d.msg);
        _exit(1);
    }
    uint16_t port = http_server_port(s->http);
    if (write(reply, &port, sizeof port) != sizeof port)
        _exit(1);
    char c;
    while (read(cmd, &c, 1) == 1) {
        double ns = bench_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        if (write(reply, &ns, sizeof ns) != sizeof ns)
            break;
    }
    svc_free(s);
    _exit(0);
}

static child child_start(size_t max_body)
{
    int a[2], b[2];
    if (pipe(a) || pipe(b)) {
        perror("pipe");
        exit(1);
    }
    child c = {0};
    c.pid = fork();
    if (c.pid == 0) {
        close(a[1]);
        close(b[0]);
        child_main(a[0], b[1], max_body);
    }
    close(a[0]);
    close(b[1]);
    c.cmd = a[1];
    c.reply = b[0];
    if (read(c.reply, &c.port, sizeof c.port) != sizeof c.port) {
        fprintf(stderr, "the server child did not start\n");
        exit(1);
    }
    return c;
}

static double child_cpu_ns(child *c)
{
    double ns = 0;
    if (write(c->cmd, "x", 1) != 1 || read(c->reply, &ns, sizeof ns) != sizeof ns) {
        fprintf(stderr, "the server child is gone\n");
        exit(1);
    }
    return ns;
}

static void child_stop(child *c)
{
    close(c->cmd);
    int st;
    waitpid(c->pid, &st, 0);
    close(c->reply);
}

/* ------------------------------------------------------------------ */
/* The client: one call per connection                                 */
/* ------------------------------------------------------------------ */

/* call sends one request on a new connection and reads the answer to the
 * end (the server closes: Connection: close); returns the HTTP status. */
static int call(uint16_t port, const char *method, const char *path, const char *body, size_t blen,
                size_t *resp_len, buf *out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        perror("connect");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Go-http-client/1.1\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      method, path, blen);
    /* As Go's transport writes: its 4 KB buffer (the head and the body's
     * start), then the rest of the body in one write. */
    char first[4096];
    size_t off = blen < sizeof first - (size_t)hl ? blen : sizeof first - (size_t)hl;
    memcpy(first, head, (size_t)hl);
    if (off)
        memcpy(first + hl, body, off);
    if (write(fd, first, (size_t)hl + off) != (ssize_t)((size_t)hl + off))
        goto fail;
    while (off < blen) {
        ssize_t w = write(fd, body + off, blen - off);
        if (w <= 0)
            goto fail;
        off += (size_t)w;
    }
    char rb[65536];
    size_t got = 0;
    int status = 0;
    ssize_t r;
    while ((r = read(fd, rb, sizeof rb)) > 0) {
        if (!status && got == 0 && r > 12)
            status = atoi(rb + 9);
        got += (size_t)r;
        if (out)
            buf_append(out, rb, (size_t)r);
    }
    close(fd);
    if (resp_len)
        *resp_len = got;
    return status;
fail:
    perror("write");
    exit(1);
}

typedef struct job {
    uint16_t port;
    const char *path;
    char **bodies;
    size_t *lens;
    int nbodies;
    int from, n; /* calls from..from+n of the phase */
    int bad;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    for (int i = 0; i < j->n; i++) {
        int k = j->from + i;
        int st = j->bodies ? call(j->port, "POST", j->path, j->bodies[k % j->nbodies],
                                  j->lens[k % j->nbodies], NULL, NULL)
                           : call(j->port, "GET", j->path, "", 0, NULL, NULL);
        if (st != 200)
            j->bad++;
    }
    return NULL;
}

/* phase runs calls on PARALLEL threads; returns server CPU ns per call. */
static double phase(child *c, const char *path, char **bodies, size_t *lens, int nbodies, int calls,
                    double *wall_s)
{
    pthread_t t[PARALLEL];
    job jobs[PARALLEL];
    double c0 = child_cpu_ns(c), w0 = bench_now_s();
    for (int i = 0; i < PARALLEL; i++) {
        jobs[i] = (job){c->port,          path, bodies, lens, nbodies, i * (calls / PARALLEL),
                        calls / PARALLEL, 0};
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    int bad = 0;
    for (int i = 0; i < PARALLEL; i++) {
        pthread_join(t[i], NULL);
        bad += jobs[i].bad;
    }
    double w1 = bench_now_s(), c1 = child_cpu_ns(c);
    if (bad)
        fprintf(stderr, "%s: %d calls not answered 200\n", path, bad);
    if (wall_s)
        *wall_s = w1 - w0;
    return (c1 - c0) / (calls / PARALLEL * PARALLEL);
}

/* median of the n (at most ROUNDS) values in in */
static double median(const double *in, int n)
{
    double v[ROUNDS];
    memcpy(v, in, (size_t)n * sizeof *v);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* metric reads agentsched_volcano_pod_memo_total{...label...} from the
 * /metrics response in m; 0 when absent. */
static unsigned long long metric(const buf *m, const char *label)
{
    const char *at = m->data ? strstr(m->data, "agentsched_volcano_pod_memo_total{") : NULL;
    for (; at; at = strstr(at + 1, "agentsched_volcano_pod_memo_total{")) {
        const char *close = strchr(at, '}');
        const char *l = strstr(at, label);
        if (close && l && l < close)
            return strtoull(close + 1, NULL, 10);
    }
    return 0;
}

static void bench_predicate(int calls)
{
    /* 64 tasks x 256 nodes of bodies, sent round-robin: each task's
     * calls repeat its Pod, as Volcano's do */
    enum { NB = 1024 };
    char **bodies = malloc(NB * sizeof *bodies);
    size_t *lens = malloc(NB * sizeof *lens);
    size_t total = 0;
    for (int i = 0; i < NB; i++) {
        bodies[i] = predicate_body(i % NTASKS, (i * 37) % BENCH_NODES);
        lens[i] = strlen(bodies[i]);
        total += lens[i];
    }
    child c = child_start(0);
    /* warm up both */
    phase(&c, "/healthz", NULL, NULL, 0, 256, NULL);
    phase(&c, "/volcano/predicate", bodies, lens, NB, 256, NULL);
    /* Rounds of /healthz then predicate: on a shared machine the load
     * moves within seconds, so each round's ratio compares neighbours and
     * the median round is reported. */
    double h[ROUNDS], p[ROUNDS], ratio[ROUNDS], hw = 0, pw = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double w;
        h[r] = phase(&c, "/healthz", NULL, NULL, 0, calls, &w);
        hw += w;
        p[r] = phase(&c, "/volcano/predicate", bodies, lens, NB, calls, &w);
        pw += w;
        ratio[r] = p[r] / h[r];
    }
    buf m;
    buf_init(&m, 1 << 24);
    call(c.port, "GET", "/metrics", "", 0, NULL, &m);
    child_stop(&c);
    printf("predicate over HTTP: %d rounds of %d calls each, %d in parallel, a new connection "
           "per call, 2 server threads; bodies %.1f KB on average\n",
           ROUNDS, calls, PARALLEL, (double)total / NB / 1024);
    printf("%-36s %8.1f us server CPU per call (median; %.0f calls/s)\n", "/healthz (baseline)",
           median(h, ROUNDS) / 1e3, ROUNDS * calls / hw);
    printf("%-36s %8.1f us server CPU per call (median; %.0f calls/s)  %.2fx baseline (median "
           "round; rounds",
           "/volcano/predicate", median(p, ROUNDS) / 1e3, ROUNDS * calls / pw,
           median(ratio, ROUNDS));
    for (int r = 0; r < ROUNDS; r++)
        printf(" %.2f", ratio[r]);
    printf(")\n");
    printf("Pod memo over the run: %llu hits, %llu misses, %llu DOM\n",
           metric(&m, "result=\"hit\""), metric(&m, "result=\"miss\""),
           metric(&m, "result=\"dom\""));
    buf_free(&m);
    for (int i = 0; i < NB; i++)
        free(bodies[i]);
    free(bodies);
    free(lens);
}

static void bench_prioritize(int nodes, int calls)
{
    char *body = prioritize_body(3, nodes);
    size_t len = strlen(body);
    /* the body exceeds the default cap at these sizes: the child gets a
     * cap that fits it, to measure the decode itself */
    child c = child_start(len + 4096);
    size_t rl = 0;
    int st = call(c.port, "POST", "/volcano/prioritize", body, len, &rl, NULL); /* warm up */
    double c0 = child_cpu_ns(&c);
    double worst = 0, sum = 0;
    for (int i = 0; i < calls && st == 200; i++) {
        double w0 = bench_now_s();
        st = call(c.port, "POST", "/volcano/prioritize", body, len, &rl, NULL);
        double w = bench_now_s() - w0;
        sum += w;
        worst = w > worst ? w : worst;
    }
    double cpu = (child_cpu_ns(&c) - c0) / calls;
    child_stop(&c);
    if (st != 200) {
        printf("prioritize, %d nodes (%.1f MB body): HTTP %d\n", nodes, (double)len / 1e6, st);
    } else {
        printf("prioritize, %5d nodes (%.1f MB body, %.1f KB a node): %.1f ms wall on average "
               "(worst %.1f), %.1f ms server CPU per call\n",
               nodes, (double)len / 1e6, (double)len / nodes / 1024, sum / calls * 1e3, worst * 1e3,
               cpu / 1e6);
    }
    free(body);
}

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 8000;
    const char *which = argc > 2 ? argv[2] : "all";
    if (calls < PARALLEL)
        calls = 8000;
    signal(SIGPIPE, SIG_IGN);
    bool all = strcmp(which, "all") == 0;
    if (all || strcmp(which, "predicate") == 0)
        bench_predicate(calls);
    if (all || strcmp(which, "prioritize") == 0) {
        /* 500: what vc-scheduler sends at 5,000 nodes with its default
         * --percentage-nodes-to-find (10% there); 1,000 and 5,000: every
         * node feasible */
        bench_prioritize(500, 10);
        bench_prioritize(1000, 10);
        bench_prioritize(5000, 5);
    }
    return 0;
}
