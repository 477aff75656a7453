/* sync.c - see sync.h. */
#include "agentsched/base/sync.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* See sync.h. */
void sync_mutex_init_hot(pthread_mutex_t *mu)
{
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(mu, &ma);
    pthread_mutexattr_destroy(&ma);
#else
    pthread_mutex_init(mu, NULL);
#endif
}

/* Every file read here is a line or a few; /proc/self/cgroup lists one
 * line per v1 hierarchy (a dozen). Longer contents are cut, and a cut
 * file parses as whatever whole lines it holds. */
#define SYNC_FILE_CAP 4096
#define SYNC_PATH_CAP 4096

/* sync_read reads up to cap-1 bytes of path into buf, NUL-terminated;
 * false when it cannot be opened or read. */
static bool sync_read(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return n > 0;
}

/* sync_parse_ll parses the integer at s (after blanks), or "max" (*v =
 * -1); false when there is neither. *end gets what follows it. */
static bool sync_parse_ll(const char *s, long long *v, const char **end)
{
    while (*s == ' ' || *s == '\t')
        s++;
    if (strncmp(s, "max", 3) == 0) {
        *v = -1;
        *end = s + 3;
        return true;
    }
    char *e;
    errno = 0;
    long long x = strtoll(s, &e, 10);
    if (e == s || errno)
        return false;
    *v = x;
    *end = e;
    return true;
}

/* sync_quota_at returns the CPU quota set in cgroup directory dir (v2:
 * cpu.max "QUOTA PERIOD"; v1: cpu.cfs_quota_us and cpu.cfs_period_us), or
 * 0 when it sets none or cannot be read. */
static double sync_quota_at(const char *dir, bool v2)
{
    char path[SYNC_PATH_CAP + 32], text[SYNC_FILE_CAP];
    long long quota, period;
    const char *end;
    if (v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        if (!sync_read(path, text, sizeof text) || !sync_parse_ll(text, &quota, &end) ||
            !sync_parse_ll(end, &period, &end))
            return 0;
    } else {
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        if (!sync_read(path, text, sizeof text) || !sync_parse_ll(text, &quota, &end))
            return 0;
        snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
        if (!sync_read(path, text, sizeof text) || !sync_parse_ll(text, &period, &end))
            return 0;
    }
    if (quota <= 0 || period <= 0)
        return 0; /* "max", -1: no quota */
    return (double)quota / (double)period;
}

/* sync_tightest walks from mount + cgpath up to mount, returning the
 * smallest quota set on the way (0: none). In a container the path
 * /proc/self/cgroup names may be the host's, absent under the container's
 * mount: those directories read as no quota and the walk goes on up. */
static double sync_tightest(const char *mount, const char *cgpath, bool v2)
{
    if (strstr(cgpath, "/..") || strlen(mount) + strlen(cgpath) >= SYNC_PATH_CAP)
        return 0;
    char dir[SYNC_PATH_CAP];
    snprintf(dir, sizeof dir, "%s%s", mount, strcmp(cgpath, "/") == 0 ? "" : cgpath);
    size_t floor = strlen(mount);
    double best = 0;
    for (;;) {
        double q = sync_quota_at(dir, v2);
        if (q > 0 && (best == 0 || q < best))
            best = q;
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= floor || !slash || (size_t)(slash - dir) < floor)
            break;
        *slash = '\0';
    }
    return best;
}

/* sync_has_cpu: the v1 controller list ("cpu,cpuacct") names cpu. */
static bool sync_has_cpu(const char *list, size_t len)
{
    const char *p = list, *end = list + len;
    while (p < end) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        size_t n = (size_t)((c ? c : end) - p);
        if (n == 3 && memcmp(p, "cpu", 3) == 0)
            return true;
        p = c ? c + 1 : end;
    }
    return false;
}

/* sync_cgroup_quota finds the process's cgroup (v2 first, then v1's cpu
 * hierarchy) and returns its tightest CPU quota, 0 when none. */
static double sync_cgroup_quota(const char *root)
{
    char path[SYNC_PATH_CAP], text[SYNC_FILE_CAP];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    if (!sync_read(path, text, sizeof text))
        return 0;
    double v2 = 0, v1 = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        /* hierarchy-ID:controllers:path */
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        char mount[SYNC_PATH_CAP];
        if (strncmp(line, "0::", 3) == 0) {
            snprintf(mount, sizeof mount, "%s/sys/fs/cgroup", root);
            v2 = sync_tightest(mount, c2 + 1, true);
        } else if (sync_has_cpu(c1 + 1, (size_t)(c2 - c1 - 1))) {
            /* the hierarchy is mounted under its controller list's name;
             * Debian and most images also link cpu to it */
            snprintf(mount, sizeof mount, "%s/sys/fs/cgroup/%.*s", root, (int)(c2 - c1 - 1),
                     c1 + 1);
            if (access(mount, F_OK) != 0)
                snprintf(mount, sizeof mount, "%s/sys/fs/cgroup/cpu", root);
            v1 = sync_tightest(mount, c2 + 1, false);
        }
    }
    /* On a hybrid host both can exist: whichever is set limits. */
    if (v1 > 0 && (v2 == 0 || v1 < v2))
        return v1;
    return v2;
}

/* See sync.h. */
void sync_usable_cpus(const char *root, sync_cpus *out)
{
    memset(out, 0, sizeof *out);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        out->affinity = (unsigned)CPU_COUNT(&set);
    if (!out->affinity) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        out->affinity = n > 0 ? (unsigned)n : 1;
    }
    out->quota = sync_cgroup_quota(root ? root : "");
    out->usable = out->affinity;
    if (out->quota > 0) {
        double q = floor(out->quota);
        if (q < 1)
            q = 1;
        if (q < (double)out->usable)
            out->usable = (unsigned)q;
    }
}

/* See sync.h. */
void sync_block_signals(sigset_t *sigs)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    sigemptyset(sigs);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}
