/* sync.c - see sync.h. */
#include "agentsched/sync.h"

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
