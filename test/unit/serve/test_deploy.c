/*
 * test_deploy.c - the manifests in deploy/ tell the truth about the binary:
 * every container that runs agentsched passes flags this build accepts.
 * `serve` command lines are run with --check appended (every flag, value
 * and combination checked: exactly one cluster source, --tls-cert with
 * --tls-key, ...); other commands with --help, which their flag parsers
 * reach only after validating every flag before it.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentsched/base/doc.h"

static const char *const manifests[] = {
    AGENTSCHED_SOURCE_DIR "/deploy/kube-scheduler/agentsched-sidecar.yaml",
    AGENTSCHED_SOURCE_DIR "/deploy/standalone/agentsched.yaml",
    AGENTSCHED_SOURCE_DIR "/deploy/shard-controller/deployment.yaml",
    AGENTSCHED_SOURCE_DIR "/deploy/gpu-share/deployment.yaml",
};

/* Runs the binary with argv (NULL-terminated, argv[0] ignored); returns the
 * exit status, stderr's first line in err. */
static int run(char **argv, char *err, size_t errlen)
{
    char path[] = "/tmp/agentsched-test-deploy-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(fd, 2);
        argv[0] = (char *)AGENTSCHED_BINARY;
        execv(AGENTSCHED_BINARY, argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    err[0] = '\0';
    FILE *f = fdopen(fd, "r");
    rewind(f);
    if (!fgets(err, (int)errlen, f))
        err[0] = '\0';
    fclose(f);
    unlink(path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void append(char **argv, int *n, int cap, const json_t *arr)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        cr_assert(json_is_string(v), "a non-string command or args item");
        cr_assert_lt(*n, cap - 2);
        argv[(*n)++] = (char *)json_string_value(v);
    }
}

/* Checks the agentsched containers of doc; returns how many it checked. */
static int check_doc(const char *file, const json_t *doc)
{
    const json_t *pod = json_object_get(json_object_get(doc, "spec"), "template");
    const json_t *containers = json_object_get(json_object_get(pod, "spec"), "containers");
    int checked = 0;
    size_t i;
    json_t *c;
    json_array_foreach(containers, i, c)
    {
        const json_t *cmd = json_object_get(c, "command");
        const json_t *args = json_object_get(c, "args");
        const char *image = json_string_value(json_object_get(c, "image"));
        const char *c0 = json_string_value(json_array_get(cmd, 0));
        bool ours = (c0 && strstr(c0, "agentsched")) ||
                    (!cmd && image && strcmp(image, "<AGENTSCHED_IMAGE>") == 0);
        if (!ours)
            continue;
        char *argv[128] = {NULL};
        int n = 1;
        if (cmd) {
            json_t *rest = json_array();
            for (size_t k = 1; k < json_array_size(cmd); k++)
                json_array_append(rest, json_array_get(cmd, k));
            append(argv, &n, 128, rest);
            json_decref(rest);
        }
        if (args)
            append(argv, &n, 128, args);
        bool serve = argv[1] && strcmp(argv[1], "serve") == 0;
        argv[n++] = serve ? "--check" : "--help";
        char err[512];
        int rc = run(argv, err, sizeof err);
        cr_assert_eq(rc, 0, "%s: container %s: `agentsched %s ...` is refused (exit %d): %s", file,
                     json_string_value(json_object_get(c, "name")), argv[1] ? argv[1] : "", rc,
                     err);
        checked++;
    }
    return checked;
}

Test(deploy, manifests_pass_flags_the_binary_accepts)
{
    int checked = 0;
    for (size_t m = 0; m < sizeof manifests / sizeof manifests[0]; m++) {
        json_t *docs = NULL;
        as_diag d = {{0}, {0}};
        cr_assert_eq(doc_load_file(manifests[m], 1 << 20, true, &docs, &d), AS_OK, "%s", d.msg);
        size_t i;
        json_t *doc;
        int here = 0;
        json_array_foreach(docs, i, doc)
        {
            const char *kind = json_string_value(json_object_get(doc, "kind"));
            if (kind && strcmp(kind, "Deployment") == 0)
                here += check_doc(manifests[m], doc);
        }
        cr_assert_gt(here, 0, "%s: no agentsched container found", manifests[m]);
        checked += here;
        json_decref(docs);
    }
    cr_assert_eq(checked, 4);
}

Test(deploy, a_serve_command_line_without_a_cluster_source_is_caught)
{
    /* --check applies the rules between flags that --help never reached */
    char *argv[] = {NULL, "serve", "--listen=0.0.0.0:8888", "--workers=0", "--check", NULL};
    char err[512];
    cr_assert_eq(run(argv, err, sizeof err), 2);
    cr_assert(strstr(err, "--in-cluster"), "%s", err);
    char *ok[] = {NULL, "serve", "--in-cluster", "--workers=0", "--check", NULL};
    cr_assert_eq(run(ok, err, sizeof err), 0, "%s", err);
}

Test(deploy, a_wrong_flag_is_caught)
{
    /* The check above would see a typo: the same run with one. */
    char *argv[] = {NULL, "serve", "--in-cluster", "--leader-elekt", "--help", NULL};
    char err[512];
    cr_assert_eq(run(argv, err, sizeof err), 2);
    cr_assert(strstr(err, "--leader-elekt"), "%s", err);
}
