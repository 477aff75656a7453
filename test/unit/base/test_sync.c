/* test_sync.c - sync_usable_cpus: the CPU budget thread pools are sized by,
 * read from cgroup trees laid out under a temporary root (a table of
 * cases: the files, then the quota they set). */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentsched/base/sync.h"

typedef struct file {
    const char *path; /* under the root */
    const char *text;
} file;

typedef struct quota_case {
    const char *name;
    file files[8];
    double quota; /* expected; 0 = none */
} quota_case;

static const quota_case cases[] = {
    {"no /proc/self/cgroup at all", {{NULL, NULL}}, 0},
    {"v2, no quota anywhere",
     {{"proc/self/cgroup", "0::/kubepods/pod1/c1\n"},
      {"sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "max 100000\n"},
      {"sys/fs/cgroup/cpu.max", "max 100000\n"}},
     0},
    {"v2, a container limited to 2 CPUs",
     {{"proc/self/cgroup", "0::/kubepods/pod1/c1\n"},
      {"sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "200000 100000\n"}},
     2},
    {"v2, the pod's limit is tighter than the container's",
     {{"proc/self/cgroup", "0::/kubepods/pod1/c1\n"},
      {"sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "400000 100000\n"},
      {"sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n"},
      {"sys/fs/cgroup/kubepods/cpu.max", "max 100000\n"}},
     1.5},
    {"v2 with a cgroup namespace: the process sees itself at the root",
     {{"proc/self/cgroup", "0::/\n"}, {"sys/fs/cgroup/cpu.max", "50000 100000\n"}},
     0.5},
    {"v2, the host's path is absent under the container's mount: its root counts",
     {{"proc/self/cgroup", "0::/kubepods/burstable/pod9/abc\n"},
      {"sys/fs/cgroup/cpu.max", "300000 100000\n"}},
     3},
    {"v1, cpu,cpuacct hierarchy",
     {{"proc/self/cgroup", "12:memory:/k/p\n4:cpu,cpuacct:/k/p\n0::/\n"},
      {"sys/fs/cgroup/cpu,cpuacct/k/p/cpu.cfs_quota_us", "250000\n"},
      {"sys/fs/cgroup/cpu,cpuacct/k/p/cpu.cfs_period_us", "100000\n"}},
     2.5},
    {"v1, unlimited (-1)",
     {{"proc/self/cgroup", "1:cpu:/\n"},
      {"sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"},
      {"sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"}},
     0},
    {"v1, cpuacct alone is not the cpu controller",
     {{"proc/self/cgroup", "2:cpuacct:/\n"},
      {"sys/fs/cgroup/cpuacct/cpu.cfs_quota_us", "100000\n"},
      {"sys/fs/cgroup/cpuacct/cpu.cfs_period_us", "100000\n"}},
     0},
    {"hybrid: v1 and v2 both set, the tighter limits",
     {{"proc/self/cgroup", "1:cpu:/\n0::/\n"},
      {"sys/fs/cgroup/cpu/cpu.cfs_quota_us", "400000\n"},
      {"sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"},
      {"sys/fs/cgroup/cpu.max", "300000 100000\n"}},
     3},
    {"malformed cpu.max: no quota",
     {{"proc/self/cgroup", "0::/\n"}, {"sys/fs/cgroup/cpu.max", "lots\n"}},
     0},
    {"cpu.max without a period: no quota",
     {{"proc/self/cgroup", "0::/\n"}, {"sys/fs/cgroup/cpu.max", "200000\n"}},
     0},
    {"zero period: no quota",
     {{"proc/self/cgroup", "0::/\n"}, {"sys/fs/cgroup/cpu.max", "200000 0\n"}},
     0},
    {"a path climbing out of the hierarchy is not followed",
     {{"proc/self/cgroup", "0::/../../etc\n"}, {"sys/fs/cgroup/cpu.max", "100000 100000\n"}},
     0},
    {"garbage lines are skipped",
     {{"proc/self/cgroup", "nonsense\n::\n7:x\n0::/\n"},
      {"sys/fs/cgroup/cpu.max", "100000 100000\n"}},
     1},
};

/* mkdir_p makes every directory of path up to its last '/'. */
static void mkdir_p(char *path)
{
    for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
        *p = '/';
    }
}

static void lay_out(const char *root, const file *files)
{
    for (const file *f = files; f->path; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", root, f->path);
        mkdir_p(path);
        FILE *fp = fopen(path, "w");
        cr_assert_not_null(fp, "%s", path);
        fputs(f->text, fp);
        fclose(fp);
    }
}

static unsigned affinity_cpus(void)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    return (unsigned)CPU_COUNT(&set);
}

Test(sync, cgroup_quota_table)
{
    unsigned aff = affinity_cpus();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const quota_case *c = &cases[i];
        char root[] = "/tmp/agentsched-cpusXXXXXX";
        cr_assert_not_null(mkdtemp(root));
        lay_out(root, c->files);
        sync_cpus got;
        sync_usable_cpus(root, &got);
        cr_expect_float_eq(got.quota, c->quota, 1e-9, "%s: quota %.3f, want %.3f", c->name,
                           got.quota, c->quota);
        cr_expect_eq(got.affinity, aff, "%s", c->name);
        unsigned want = aff;
        if (c->quota > 0) {
            unsigned q = c->quota < 1 ? 1 : (unsigned)c->quota;
            want = q < aff ? q : aff;
        }
        cr_expect_eq(got.usable, want, "%s: usable %u, want %u", c->name, got.usable, want);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        cr_assert_eq(system(cmd), 0);
    }
}

/* The quota is rounded down, never to 0; a quota above the affinity mask
 * leaves the mask's count. */
Test(sync, quota_rounds_down_to_at_least_one_and_never_raises_the_mask)
{
    unsigned aff = affinity_cpus();
    static const struct {
        const char *max;
        double cpus;
    } q[] = {{"10000 100000", 0.1}, {"199999 100000", 1.99999}, {"100000000 100000", 1000}};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        char root[] = "/tmp/agentsched-cpusXXXXXX";
        cr_assert_not_null(mkdtemp(root));
        file files[] = {
            {"proc/self/cgroup", "0::/\n"}, {"sys/fs/cgroup/cpu.max", q[i].max}, {NULL, NULL}};
        lay_out(root, files);
        sync_cpus got;
        sync_usable_cpus(root, &got);
        cr_expect_float_eq(got.quota, q[i].cpus, 1e-9, "%s", q[i].max);
        unsigned want = q[i].cpus < 1 ? 1 : (unsigned)q[i].cpus;
        if (want > aff)
            want = aff;
        cr_expect_eq(got.usable, want, "%s: usable %u", q[i].max, got.usable);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        cr_assert_eq(system(cmd), 0);
    }
}

/* The real files of this machine: whatever they say, a usable count
 * within the mask. */
Test(sync, this_machine)
{
    sync_cpus got;
    sync_usable_cpus(NULL, &got);
    cr_assert_geq(got.usable, 1);
    cr_assert_leq(got.usable, got.affinity);
    cr_assert_eq(got.affinity, affinity_cpus());
}
