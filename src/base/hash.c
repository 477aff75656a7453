/* hash.c - see hash.h. */
#include "agentsched/base/hash.h"

/* See hash.h. */
uint64_t hash_str(const char *s)
{
    return s ? hash_bytes(s, strlen(s)) : hash_bytes("", 0);
}
