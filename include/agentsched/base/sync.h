/*
 * sync.h - locking helpers shared by the modules that hand work between
 * threads (queue, cache writer, fast-path bind stage, equivalence cache),
 * and how many CPUs the process's thread pools should be sized for.
 */
#ifndef AGENTSCHED_SYNC_H
#define AGENTSCHED_SYNC_H

#include <pthread.h>
#include <signal.h>

/*
 * sync_mutex_init_hot initialises *mu for a hot, short critical section:
 * held for well under a microsecond to a few, and taken by several threads
 * per scheduling decision. Such a mutex spins briefly before sleeping
 * (glibc's adaptive type, where available), as a futex sleep and wake-up
 * costs more than the wait it avoids. Destroy with pthread_mutex_destroy.
 */
void sync_mutex_init_hot(pthread_mutex_t *mu);

/* What sync_usable_cpus found. */
typedef struct sync_cpus {
    unsigned usable;   /* what to size a thread pool by: affinity, lowered to
                          the quota rounded down, at least 1 */
    unsigned affinity; /* CPUs in the affinity mask (taskset, cpuset); the
                          online CPUs when the mask cannot be read */
    double quota;      /* the tightest cgroup CPU quota of the process's
                          cgroup and its ancestors, in CPUs; 0 = none */
} sync_cpus;

/*
 * sync_usable_cpus finds how many CPUs this process can keep busy: the
 * CPUs of its affinity mask, lowered to the tightest CPU quota of its
 * cgroup or any ancestor (cgroup v2 cpu.max, v1 cpu.cfs_quota_us over
 * cpu.cfs_period_us) rounded down, at least 1. A container limited to 2
 * CPUs on a 64-core node sees 64 online CPUs; threads past its quota
 * only get it throttled at the end of each period (tail latency in
 * milliseconds). root prefixes the /proc and /sys paths read (NULL: the
 * real ones; tests pass a directory laid out the same way). Files that
 * are missing, unreadable or malformed count as no quota. Never fails.
 */
void sync_usable_cpus(const char *root, sync_cpus *out);

/* sync_block_signals blocks SIGINT, SIGTERM and SIGHUP in the calling
 * thread (and every thread it starts afterwards) and fills *sigs with them,
 * for the command's main thread to take them with sigtimedwait: no signal
 * handler and no global flag. They are reset to their default first (a
 * parent may have left them ignored, and an ignored signal is discarded
 * rather than queued); SIGPIPE is ignored (a vanished peer is a write
 * error, not a death). Call before starting any thread. */
void sync_block_signals(sigset_t *sigs);

#endif
