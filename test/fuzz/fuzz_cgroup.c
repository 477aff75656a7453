/* fuzz_cgroup.c - libFuzzer target for sync_usable_cpus's reading of
 * /proc/self/cgroup and the quota files it leads to.
 *
 * The input is split at its first NUL: before it, /proc/self/cgroup;
 * after it, what every quota file the walk may open holds (cpu.max, v1's
 * cpu.cfs_quota_us and cpu.cfs_period_us, at the hierarchy's roots and at
 * /sys/fs/cgroup/a/b). The root is a temporary directory made once.
 * Besides "no crash", checks the result's invariants: at least one CPU,
 * never more than the affinity mask, a quota that is 0 or positive. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentsched/base/sync.h"

static char root[64];

static void put(const char *rel, const char *data, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    if (len && fwrite(data, 1, len, f) != len)
        abort();
    fclose(f);
}

static void dir(const char *rel)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        abort();
}

static const char *const quota_files[] = {
    "sys/fs/cgroup/cpu.max",
    "sys/fs/cgroup/a/cpu.max",
    "sys/fs/cgroup/a/b/cpu.max",
    "sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    "sys/fs/cgroup/cpu/cpu.cfs_period_us",
    "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us",
    "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us",
};

static const char *const dirs[] = {"proc",
                                   "proc/self",
                                   "sys",
                                   "sys/fs",
                                   "sys/fs/cgroup",
                                   "sys/fs/cgroup/a",
                                   "sys/fs/cgroup/a/b",
                                   "sys/fs/cgroup/cpu",
                                   "sys/fs/cgroup/cpu,cpuacct"};

/* cleanup removes what the target wrote, deepest first. */
static void cleanup(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    unlink(path);
    for (size_t i = 0; i < sizeof quota_files / sizeof quota_files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, quota_files[i]);
        unlink(path);
    }
    for (size_t i = sizeof dirs / sizeof dirs[0]; i-- > 0;) {
        snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
        rmdir(path);
    }
    rmdir(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(root, sizeof root, "/tmp/agentsched-fuzz-cgroupXXXXXX");
    if (!mkdtemp(root))
        abort();
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        dir(dirs[i]);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    const char *nul = memchr(s, '\0', size);
    size_t cglen = nul ? (size_t)(nul - s) : size;
    const char *q = nul ? nul + 1 : "";
    size_t qlen = nul ? size - cglen - 1 : 0;
    put("proc/self/cgroup", s, cglen);
    for (size_t i = 0; i < sizeof quota_files / sizeof quota_files[0]; i++)
        put(quota_files[i], q, qlen);
    sync_cpus got;
    sync_usable_cpus(root, &got);
    if (got.usable < 1 || got.usable > got.affinity || !(got.quota >= 0))
        abort();
    return 0;
}
