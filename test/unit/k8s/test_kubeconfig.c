/*
 * test_kubeconfig.c - kubeconfig and in-cluster settings, base64, token
 * rotation, and the client-side rate limiter.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "agentsched/core/cache.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/base/log.h"
#include "k8s_stub.c"

#define KDIR TEST_DATA_DIR "/k8s"

static k8s_conn *load_ok(const char *file, const char *ctx)
{
    k8s_conn *c = NULL;
    as_diag d = {{0}, {0}};
    as_err err = k8s_conn_from_kubeconfig(file, ctx, &c, &d);
    cr_assert_eq(err, AS_OK, "%s: %s (%s)", file, d.msg, d.field);
    cr_assert_not_null(c);
    return c;
}

static void load_bad(const char *file, as_err want, const char *msg_part, const char *field_part)
{
    k8s_conn *c = NULL;
    as_diag d = {{0}, {0}};
    as_err err = k8s_conn_from_kubeconfig(file, NULL, &c, &d);
    cr_assert_eq(err, want, "%s: got %s want %s: %s", file, as_strerror(err), as_strerror(want),
                 d.msg);
    cr_assert_null(c);
    if (msg_part)
        cr_assert(strstr(d.msg, msg_part) != NULL, "%s: message \"%s\" lacks \"%s\"", file, d.msg,
                  msg_part);
    if (field_part)
        cr_assert(strstr(d.field, field_part) != NULL, "%s: field \"%s\" lacks \"%s\"", file,
                  d.field, field_part);
}

Test(kubeconfig, token_and_ca_data)
{
    k8s_conn *c = load_ok(KDIR "/kubeconfig-token.yaml", NULL);
    cr_assert_str_eq(c->server, "https://10.0.0.1:6443", "trailing slash dropped");
    cr_assert_str_eq(c->context, "prod");
    cr_assert_str_eq(c->token, "abc.def.ghi");
    cr_assert_not_null(c->ca_data.data);
    cr_assert(strstr((char *)c->ca_data.data, "BEGIN CERTIFICATE") != NULL);
    cr_assert_null(c->ca_file);
    cr_assert_not(c->insecure);
    k8s_conn_free(c);
}

Test(kubeconfig, kind_client_cert_data)
{
    k8s_conn *c = load_ok(KDIR "/kubeconfig-kind.yaml", NULL);
    cr_assert_str_eq(c->server, "https://127.0.0.1:39151");
    cr_assert(strstr((char *)c->cert_data.data, "MIIBclient") != NULL);
    cr_assert(strstr((char *)c->key_data.data, "PRIVATE KEY") != NULL);
    cr_assert_null(c->token);
    k8s_conn_free(c);
}

Test(kubeconfig, relative_files_resolved)
{
    k8s_conn *c = load_ok(KDIR "/kubeconfig-files.yaml", NULL);
    cr_assert_str_eq(c->ca_file, KDIR "/ca.crt");
    cr_assert_str_eq(c->cert_file, KDIR "/client.crt");
    cr_assert_str_eq(c->key_file, KDIR "/client.key");
    cr_assert_str_eq(c->tls_server_name, "kubernetes.default");
    k8s_conn_free(c);
    c = load_ok(KDIR "/kubeconfig-files.yaml", "tokenfile");
    cr_assert_str_eq(c->context, "tokenfile");
    cr_assert_str_eq(c->token_file, KDIR "/token.txt");
    cr_assert(c->insecure);
    cr_assert_str_eq(c->server, "http://127.0.0.1:8080");
    k8s_conn_free(c);
}

Test(kubeconfig, bad_inputs_have_clear_errors)
{
    load_bad(KDIR "/does-not-exist.yaml", AS_EIO, "does-not-exist.yaml", NULL);
    load_bad(KDIR "/bad-no-current.yaml", AS_ENOTFOUND, "current-context", "current-context");
    load_bad(KDIR "/bad-unknown-context.yaml", AS_ENOTFOUND, "context \"missing\" not found",
             "contexts");
    load_bad(KDIR "/bad-unknown-cluster.yaml", AS_ENOTFOUND, "cluster \"nope\"", "clusters");
    load_bad(KDIR "/bad-unknown-user.yaml", AS_ENOTFOUND, "user \"ghost\"", "users");
    load_bad(KDIR "/bad-missing-cert.yaml", AS_EAUTH, "/nonexistent/client.crt",
             "users[0].user.client-certificate");
    load_bad(KDIR "/bad-missing-tokenfile.yaml", AS_EAUTH, "does-not-exist.token",
             "users[0].user.tokenFile");
    load_bad(KDIR "/bad-base64.yaml", AS_EINVAL, "base64",
             "clusters[0].cluster.certificate-authority-data");
    load_bad(KDIR "/bad-exec.yaml", AS_EUNSUPPORTED, "exec", "users[0].user");
    load_bad(KDIR "/bad-no-server.yaml", AS_EINVAL, "no server", "clusters[0].cluster");
    load_bad(KDIR "/bad-server-scheme.yaml", AS_EINVAL, "https://", "server");
    load_bad(KDIR "/bad-cert-no-key.yaml", AS_EAUTH, "give both", "users[0].user");
    load_bad(KDIR "/bad-yaml.yaml", AS_EPARSE, NULL, NULL);
    load_bad(KDIR "/bad-not-mapping.yaml", AS_EPARSE, "mapping", NULL);
}

Test(kubeconfig, unknown_explicit_context)
{
    k8s_conn *c = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_conn_from_kubeconfig(KDIR "/kubeconfig-token.yaml", "staging", &c, &d),
                 AS_ENOTFOUND);
    cr_assert(strstr(d.msg, "staging") != NULL, "%s", d.msg);
}

Test(kubeconfig, base64)
{
    struct {
        const char *in;
        const char *out;
    } ok[] = {
        {"", ""},
        {"Zg==", "f"},
        {"Zm8=", "fo"},
        {"Zm9v", "foo"},
        {"Zm9vYg", "foob"},
        {"Zm9vYmE=", "fooba"},
        {"Zm9v\nYmFy", "foobar"},
        {" Zm9vYmFy ", "foobar"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        k8s_blob b;
        cr_assert_eq(k8s_base64_decode(ok[i].in, strlen(ok[i].in), &b), AS_OK, "%s", ok[i].in);
        cr_assert_eq(b.len, strlen(ok[i].out));
        cr_assert_eq(memcmp(b.data, ok[i].out, b.len), 0, "%s", ok[i].in);
        free(b.data);
    }
    const char *bad[] = {"Z", "Zm9v!", "Zg==Zg", "*"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        k8s_blob b;
        cr_assert_eq(k8s_base64_decode(bad[i], strlen(bad[i]), &b), AS_EINVAL, "%s", bad[i]);
        cr_assert_null(b.data);
    }
}

Test(kubeconfig, in_cluster)
{
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    k8s_conn *c = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_conn_in_cluster(KDIR "/sa", &c, &d), AS_ENOTFOUND);
    cr_assert(strstr(d.msg, "KUBERNETES_SERVICE_HOST") != NULL, "%s", d.msg);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    cr_assert_eq(k8s_conn_in_cluster(KDIR "/sa", &c, &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(c->server, "https://10.96.0.1:443");
    cr_assert_str_eq(c->token_file, KDIR "/sa/token");
    cr_assert_str_eq(c->ca_file, KDIR "/sa/ca.crt");
    k8s_conn_free(c);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    cr_assert_eq(k8s_conn_in_cluster(KDIR "/sa", &c, &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(c->server, "https://[fd00::1]:443");
    k8s_conn_free(c);
    c = NULL;
    cr_assert_eq(k8s_conn_in_cluster(KDIR "/no-such-sa", &c, &d), AS_EAUTH);
    cr_assert(strstr(d.msg, "token") != NULL, "%s", d.msg);
    cr_assert_null(c);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

static void write_file(const char *path, const char *content)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fputs(content, f);
    fclose(f);
    cr_assert_eq(rename(tmp, path), 0); /* like kubelet: a new file atomically */
}

static void msleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

Test(kubeconfig, token_file_rotation)
{
    log_set_level(LOG_WARN);
    k8s_stub *stub = stub_new();
    char dir[] = "/tmp/agentsched-tokXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char tokpath[600];
    snprintf(tokpath, sizeof tokpath, "%s/token", dir);
    write_file(tokpath, "first-token\n");
    model_registry reg;
    model_registry_init(&reg);
    cache *c;
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    k8s_conn conn = {0};
    conn.server = (char *)stub_url(stub);
    conn.token_file = tokpath;
    k8s_config cfg;
    k8s_config_defaults(&cfg);
    cfg.conn = &conn;
    k8s_client *k;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_client_new(&cfg, c, &k, &d), AS_OK, "%s", d.msg);
    buf resp;
    buf_init(&resp, 1 << 20);
    long status = 0;
    char auth[256];
    cr_assert_eq(k8s_request(k, "GET", "/api/v1/nodes?limit=1", NULL, 0, &resp, &status, &d), AS_OK,
                 "%s", d.msg);
    cr_assert_eq(status, 200);
    stub_last_auth(stub, auth, sizeof auth);
    cr_assert_str_eq(auth, "Bearer first-token");
    write_file(tokpath, "second-token\n");
    msleep(1100); /* re-checked at most once a second */
    buf_reset(&resp);
    cr_assert_eq(k8s_request(k, "GET", "/api/v1/nodes?limit=1", NULL, 0, &resp, &status, &d),
                 AS_OK);
    stub_last_auth(stub, auth, sizeof auth);
    cr_assert_str_eq(auth, "Bearer second-token");
    /* Unknown path: still an HTTP answer, status says 404. */
    buf_reset(&resp);
    cr_assert_eq(k8s_request(k, "GET", "/nope", NULL, 0, &resp, &status, &d), AS_OK);
    cr_assert_eq(status, 404);
    buf_free(&resp);
    k8s_client_free(k);
    cache_free(c);
    model_registry_destroy(&reg);
    stub_free(stub);
    unlink(tokpath);
    rmdir(dir);
}

Test(kubeconfig, client_errors)
{
    model_registry reg;
    model_registry_init(&reg);
    cache *c;
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    k8s_config cfg;
    k8s_config_defaults(&cfg);
    k8s_client *k = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_client_new(&cfg, c, &k, &d), AS_EINVAL, "no source");
    cr_assert(strstr(d.msg, "--kubeconfig") != NULL, "%s", d.msg);
    cfg.kubeconfig = KDIR "/bad-unknown-context.yaml";
    cr_assert_eq(k8s_client_new(&cfg, c, &k, &d), AS_ENOTFOUND);
    cfg.kubeconfig = KDIR "/kubeconfig-token.yaml";
    cfg.qps = 10;
    cfg.burst = 0;
    cr_assert_eq(k8s_client_new(&cfg, c, &k, &d), AS_EINVAL);
    cr_assert(strstr(d.msg, "burst") != NULL, "%s", d.msg);
    cr_assert_null(k);
    /* Connection refused: a transport error, not an HTTP status. */
    k8s_conn conn = {0};
    conn.server = "http://127.0.0.1:1";
    k8s_config_defaults(&cfg);
    cfg.conn = &conn;
    cr_assert_eq(k8s_client_new(&cfg, c, &k, &d), AS_OK);
    buf resp;
    buf_init(&resp, 1024);
    long status = -1;
    cr_assert_eq(k8s_request(k, "GET", "/api/v1/nodes", NULL, 0, &resp, &status, &d), AS_EIO);
    cr_assert_eq(status, 0);
    cr_assert(strstr(d.msg, "127.0.0.1:1") != NULL, "%s", d.msg);
    buf_free(&resp);
    k8s_client_free(k);
    cache_free(c);
    model_registry_destroy(&reg);
}

Test(kubeconfig, tls_server_name_routes)
{
    static const struct {
        const char *server, *name, *url, *connect_to;
        as_err err;
        const char *field;
    } cases[] = {
        {"https://10.0.0.1:6443", NULL, "https://10.0.0.1:6443", NULL, AS_OK, NULL},
        {"https://10.0.0.1:6443", "", "https://10.0.0.1:6443", NULL, AS_OK, NULL},
        {"https://10.0.0.1:6443", "kubernetes.default", "https://kubernetes.default:6443",
         "kubernetes.default:6443:10.0.0.1:6443", AS_OK, NULL},
        {"https://api.example.com", "k8s", "https://k8s:443", "k8s:443:api.example.com:443", AS_OK,
         NULL},
        {"https://[::1]:6443", "k8s", "https://k8s:6443", "k8s:6443:[::1]:6443", AS_OK, NULL},
        {"https://10.0.0.1:6443/prefix", "k8s", "https://k8s:6443/prefix", "k8s:6443:10.0.0.1:6443",
         AS_OK, NULL},
        {"HTTPS://h:1", "k8s", "https://k8s:1", "k8s:1:h:1", AS_OK, NULL},
        /* plain http: nothing to name, as in client-go */
        {"http://127.0.0.1:8080", "k8s", "http://127.0.0.1:8080", NULL, AS_OK, NULL},
        {"https://10.0.0.1:0", "k8s", NULL, NULL, AS_EINVAL, "server"},
        {"https://10.0.0.1:70000", "k8s", NULL, NULL, AS_EINVAL, "server"},
        {"https://10.0.0.1:", "k8s", NULL, NULL, AS_EINVAL, "server"},
        {"https://10.0.0.1:64x", "k8s", NULL, NULL, AS_EINVAL, "server"},
        {"https://:6443", "k8s", NULL, NULL, AS_EINVAL, "server"},
        {"https://[::1:6443", "k8s", NULL, NULL, AS_EINVAL, "server"},
        {"https://[::1]x", "k8s", NULL, NULL, AS_EINVAL, "server"},
        {"https://h:1", "k8s:1", NULL, NULL, AS_EINVAL, "tls-server-name"},
        {"https://h:1", "a/b", NULL, NULL, AS_EINVAL, "tls-server-name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        k8s_conn c = {0};
        c.server = (char *)cases[i].server;
        c.tls_server_name = (char *)cases[i].name;
        char *url = NULL, *to = NULL;
        as_diag d = {{0}, {0}};
        as_err err = k8s_conn_route(&c, &url, &to, &d);
        cr_assert_eq(err, cases[i].err, "%s %s: %s", cases[i].server, cases[i].name, d.msg);
        if (err) {
            cr_assert_null(url);
            cr_assert_null(to);
            cr_assert_str_eq(d.field, cases[i].field, "%s: %s", cases[i].server, d.msg);
            continue;
        }
        cr_assert_str_eq(url, cases[i].url);
        if (cases[i].connect_to)
            cr_assert_str_eq(to, cases[i].connect_to);
        else
            cr_assert_null(to);
        free(url);
        free(to);
    }
}

Test(kubeconfig, rate_limiter_paces_requests)
{
    log_set_level(LOG_WARN);
    k8s_stub *stub = stub_new();
    model_registry reg;
    model_registry_init(&reg);
    cache *c;
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    k8s_conn conn = {0};
    conn.server = (char *)stub_url(stub);
    k8s_config cfg;
    k8s_config_defaults(&cfg);
    cfg.conn = &conn;
    cfg.qps = 20;
    cfg.burst = 5;
    k8s_client *k;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_client_new(&cfg, c, &k, &d), AS_OK);
    buf resp;
    buf_init(&resp, 1 << 20);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 15; i++) {
        long status;
        buf_reset(&resp);
        cr_assert_eq(k8s_request(k, "GET", "/api/v1/nodes", NULL, 0, &resp, &status, &d), AS_OK);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    /* 5 from the burst, then 10 at 20/s: at least ~0.5 s. */
    cr_assert_geq(el, 0.45, "15 requests at qps 20 burst 5 took %.3fs", el);
    buf_free(&resp);
    k8s_client_free(k);
    cache_free(c);
    model_registry_destroy(&reg);
    stub_free(stub);
}

/* ---- TLS: CA / client certificate as files and as memory blobs ------- */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

extern char **environ;

static bool run(const char *cmd)
{
    return system(cmd) == 0;
}

static k8s_blob slurp(const char *path)
{
    k8s_blob b = {0};
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.data = malloc((size_t)n + 1);
    cr_assert_eq(fread(b.data, 1, (size_t)n, f), (size_t)n);
    b.data[n] = 0;
    b.len = (size_t)n;
    fclose(f);
    return b;
}

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static bool port_open(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static long tls_get(model_registry *reg, const k8s_conn *conn, as_err *err, char *msg, size_t len)
{
    cache *c;
    cr_assert_eq(cache_new(reg, &c), AS_OK);
    k8s_config cfg;
    k8s_config_defaults(&cfg);
    cfg.conn = conn;
    cfg.connect_timeout_ms = 3000;
    cfg.request_timeout_ms = 5000;
    k8s_client *k;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_client_new(&cfg, c, &k, &d), AS_OK, "%s", d.msg);
    buf resp;
    buf_init(&resp, 1 << 20);
    long status = 0;
    *err = k8s_request(k, "GET", "/", NULL, 0, &resp, &status, &d);
    snprintf(msg, len, "%s", d.msg);
    buf_free(&resp);
    k8s_client_free(k);
    cache_free(c);
    return status;
}

Test(k8s_tls, ca_and_client_cert_files_and_blobs)
{
    if (!run("command -v openssl >/dev/null 2>&1")) {
        fprintf(stderr, "k8s_tls: openssl CLI not installed; skipped\n");
        return;
    }
    log_set_level(LOG_ERROR);
    char dir[] = "/tmp/agentsched-tlsXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && exec >/dev/null 2>&1 && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout ca.key -out ca.crt -days 1 -subj /CN=test-ca && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout other.key -out other.crt -days 1 -subj /CN=other-ca && "
             "printf 'subjectAltName=IP:127.0.0.1,DNS:api.agentsched.test\\n' > san.ext && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout srv.key -out srv.csr -subj /CN=127.0.0.1 && "
             "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-out srv.crt -days 1 -extfile san.ext && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout cli.key -out cli.csr -subj /CN=admin/O=system:masters && "
             "openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-out cli.crt -days 1",
             dir);
    cr_assert(run(cmd), "openssl could not make test certificates");
    uint16_t port = free_port();
    char portarg[16], crt[600], key[600], ca[600], cli_crt[600], cli_key[600], other[600];
    snprintf(portarg, sizeof portarg, "%u", port);
    snprintf(crt, sizeof crt, "%s/srv.crt", dir);
    snprintf(key, sizeof key, "%s/srv.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(cli_crt, sizeof cli_crt, "%s/cli.crt", dir);
    snprintf(cli_key, sizeof cli_key, "%s/cli.key", dir);
    snprintf(other, sizeof other, "%s/other.crt", dir);
    char *argv[] = {"openssl", "s_server", "-quiet",  "-www", "-accept", portarg, "-cert", crt,
                    "-key",    key,        "-CAfile", ca,     "-Verify", "1",     NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    cr_assert_eq(posix_spawnp(&pid, "openssl", &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    for (int t = 0; t < 5000 && !port_open(port); t += 20)
        msleep(20);

    model_registry reg;
    model_registry_init(&reg);
    char server[64], msg[512];
    snprintf(server, sizeof server, "https://127.0.0.1:%u", port);
    as_err err;

    /* Files. */
    k8s_conn c = {0};
    c.server = server;
    c.ca_file = ca;
    c.cert_file = cli_crt;
    c.key_file = cli_key;
    cr_assert_eq(tls_get(&reg, &c, &err, msg, sizeof msg), 200, "files: %s", msg);

    /* Memory blobs (kubeconfig *-data). */
    k8s_conn b = {0};
    b.server = server;
    b.ca_data = slurp(ca);
    b.cert_data = slurp(cli_crt);
    b.key_data = slurp(cli_key);
    cr_assert_eq(tls_get(&reg, &b, &err, msg, sizeof msg), 200, "blobs: %s", msg);

    /* tls-server-name: the certificate is checked against that name (and
     * the connection still goes to 127.0.0.1): a name the certificate
     * does not carry fails, its own DNS name passes. */
    k8s_conn sn = b;
    sn.tls_server_name = "wrong.agentsched.test";
    cr_assert_eq(tls_get(&reg, &sn, &err, msg, sizeof msg), 0);
    cr_assert_eq(err, AS_EIO, "%s", msg);
    sn.tls_server_name = "api.agentsched.test";
    cr_assert_eq(tls_get(&reg, &sn, &err, msg, sizeof msg), 200, "tls-server-name: %s", msg);

    /* The wrong CA fails verification; insecure-skip-tls-verify gets through. */
    k8s_conn w = b;
    k8s_blob oth = slurp(other);
    w.ca_data = oth;
    cr_assert_eq(tls_get(&reg, &w, &err, msg, sizeof msg), 0);
    cr_assert_eq(err, AS_EIO, "%s", msg);
    w.insecure = true;
    cr_assert_eq(tls_get(&reg, &w, &err, msg, sizeof msg), 200, "insecure: %s", msg);

    /* No client certificate: the server refuses the handshake. */
    k8s_conn n = {0};
    n.server = server;
    n.ca_data = b.ca_data;
    cr_assert_eq(tls_get(&reg, &n, &err, msg, sizeof msg), 0);
    cr_assert_eq(err, AS_EIO, "%s", msg);

    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    free(b.ca_data.data);
    free(b.cert_data.data);
    free(b.key_data.data);
    free(oth.data);
    model_registry_destroy(&reg);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd);
}
