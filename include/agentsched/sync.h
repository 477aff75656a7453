/*
 * sync.h - locking helpers shared by the modules that hand work between
 * threads (queue, cache writer, fast-path bind stage, equivalence cache).
 */
#ifndef AGENTSCHED_SYNC_H
#define AGENTSCHED_SYNC_H

#include <pthread.h>

/*
 * sync_mutex_init_hot initialises *mu for a hot, short critical section:
 * held for well under a microsecond to a few, and taken by several threads
 * per scheduling decision. Such a mutex spins briefly before sleeping
 * (glibc's adaptive type, where available), as a futex sleep and wake-up
 * costs more than the wait it avoids. Destroy with pthread_mutex_destroy.
 */
void sync_mutex_init_hot(pthread_mutex_t *mu);

#endif
