/*
 * controller_fixtures.h - shared helpers for the tests that run a
 * controller command whole (the shard controller, the GPU share
 * advertiser) on a thread against the stub API server: a scratch directory
 * with a kubeconfig for the stub, a free --listen address, GETs and metric
 * reads there, the check that the shipped dashboard and alert rules query
 * only what the controller serves, and SIGTERM to end it. Included by one
 * test file each (everything static), after k8s_stub.c.
 */
#ifndef AGENTSCHED_TEST_CONTROLLER_FIXTURES_H
#define AGENTSCHED_TEST_CONTROLLER_FIXTURES_H

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"

typedef int (*ctlfx_main_fn)(int argc, char **argv);

/* One controller run: its files, address, argv and thread. */
typedef struct ctlfx {
    char dir[64], kubeconfig[128], listen[64], url[96];
    char *argv[32];
    int argc;
    ctlfx_main_fn main_fn;
    pthread_t th;
    int rc;
} ctlfx;

static void ctlfx_quiet(void)
{
    log_set_level(LOG_ERROR);
}

/* ctlfx_free_port asks the kernel for a port nobody holds now. */
static int ctlfx_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* ctlfx_init makes the scratch directory (tag names it), a kubeconfig for
 * the stub with the token "secret", a free --listen address, and argv's
 * start: command, --kubeconfig, --listen, --log-level error. */
static void ctlfx_init(ctlfx *x, k8s_stub *stub, const char *tag, const char *command,
                       ctlfx_main_fn main_fn)
{
    memset(x, 0, sizeof *x);
    x->main_fn = main_fn;
    snprintf(x->dir, sizeof x->dir, "/tmp/as-%s-XXXXXX", tag);
    cr_assert_not_null(mkdtemp(x->dir));
    snprintf(x->kubeconfig, sizeof x->kubeconfig, "%s/kubeconfig", x->dir);
    cr_assert(stub_write_kubeconfig(stub, x->kubeconfig));
    int port = ctlfx_free_port();
    snprintf(x->listen, sizeof x->listen, "127.0.0.1:%d", port);
    snprintf(x->url, sizeof x->url, "http://127.0.0.1:%d", port);
    const char *base[] = {command,   "--kubeconfig", x->kubeconfig, "--listen",
                          x->listen, "--log-level",  "error"};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        x->argv[x->argc++] = (char *)base[i];
}

/* ctlfx_arg appends one argument (borrowed: it must outlive the run). */
static void ctlfx_arg(ctlfx *x, const char *arg)
{
    cr_assert_lt(x->argc, (int)(sizeof x->argv / sizeof x->argv[0]) - 1);
    x->argv[x->argc++] = (char *)arg;
}

static void *ctlfx_thread(void *arg)
{
    ctlfx *x = arg;
    x->rc = x->main_fn(x->argc, x->argv);
    return NULL;
}

/* ctlfx_start runs the command on its own thread. */
static void ctlfx_start(ctlfx *x)
{
    cr_assert_eq(pthread_create(&x->th, NULL, ctlfx_thread, x), 0);
}

/* ctlfx_stop sends SIGTERM to the command's thread (it blocks the signal
 * and waits for it there), expects exit status 0 and removes the
 * kubeconfig; the caller removes its own files before. */
static void ctlfx_stop(ctlfx *x)
{
    cr_assert_eq(pthread_kill(x->th, SIGTERM), 0);
    pthread_join(x->th, NULL);
    cr_expect_eq(x->rc, 0, "exit status %d", x->rc);
    unlink(x->kubeconfig);
    rmdir(x->dir);
}

static size_t ctlfx_sink(char *p, size_t sz, size_t n, void *ud)
{
    return buf_append(ud, p, sz * n) ? 0 : sz * n;
}

/* ctlfx_get fetches path from the --listen address into b; the status, 0
 * when nothing answered. */
static long ctlfx_get(ctlfx *x, const char *path, buf *b)
{
    char url[160];
    snprintf(url, sizeof url, "%s%s", x->url, path);
    buf_reset(b);
    CURL *c = curl_easy_init();
    cr_assert_not_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ctlfx_sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    return code;
}

/* ctlfx_metric reads one series from /metrics (-1 when absent or
 * unreachable). */
static double ctlfx_metric(ctlfx *x, const char *series)
{
    buf b;
    buf_init(&b, 1 << 20);
    double v = -1;
    if (ctlfx_get(x, "/metrics", &b) == 200 && b.data) {
        size_t n = strlen(series);
        for (const char *p = b.data; (p = strstr(p, series)); p += n)
            if ((p == b.data || p[-1] == '\n') && p[n] == ' ') {
                v = strtod(p + n + 1, NULL);
                break;
            }
    }
    buf_free(&b);
    return v;
}

/* ctlfx_wait_metric waits up to ms for series to reach at least want. */
static void ctlfx_wait_metric(ctlfx *x, const char *series, double want, int64_t ms)
{
    int64_t end = clock_mono_ms() + ms;
    double v;
    while ((v = ctlfx_metric(x, series)) < want && clock_mono_ms() < end)
        usleep(20000);
    cr_assert(v >= want, "%s is %g, want at least %g", series, v, want);
}

/* ctlfx_served_check fails unless every series of prefix that file names
 * has a "# TYPE" line in metrics_text; returns how many names it checked. */
static int ctlfx_served_check(const char *file, const char *prefix, const char *metrics_text)
{
    FILE *fp = fopen(file, "r");
    cr_assert_not_null(fp, "%s", file);
    buf text;
    buf_init(&text, 1 << 20);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0)
        cr_assert_eq(buf_append(&text, chunk, n), AS_OK);
    fclose(fp);
    int checked = 0;
    size_t plen = strlen(prefix);
    for (const char *p = text.data; p && (p = strstr(p, prefix)); p += plen) {
        size_t len = plen;
        while ((p[len] >= 'a' && p[len] <= 'z') || p[len] == '_')
            len++;
        char want[160];
        snprintf(want, sizeof want, "# TYPE %.*s ", (int)len, p);
        cr_expect_not_null(strstr(metrics_text, want), "%s queries %.*s, which /metrics lacks",
                           file, (int)len, p);
        checked++;
    }
    buf_free(&text);
    return checked;
}

/* ctlfx_shipped_series_served checks the controllers' shipped dashboard
 * and alert rules against what this controller's /metrics serves (only
 * the series named with prefix: the other controller's are not here). */
static void ctlfx_shipped_series_served(ctlfx *x, const char *prefix)
{
    buf b;
    buf_init(&b, 1 << 20);
    cr_assert_eq(ctlfx_get(x, "/metrics", &b), 200);
    int n =
        ctlfx_served_check(AGENTSCHED_SOURCE_DIR "/deploy/dashboards/agentsched-controllers.json",
                           prefix, b.data) +
        ctlfx_served_check(AGENTSCHED_SOURCE_DIR
                           "/deploy/dashboards/agentsched-controllers-alerts.yaml",
                           prefix, b.data);
    cr_assert_gt(n, 3, "no %s series found in the shipped files", prefix);
    buf_free(&b);
}

#endif
