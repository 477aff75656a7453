/*
 * listen.c - "HOST:PORT" to a socket address (see listen.h).
 */
#include "agentsched/base/listen.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* See listen.h. */
void listen_host(const char *listen, char *out, size_t len)
{
    const char *colon = strrchr(listen, ':');
    size_t n = colon ? (size_t)(colon - listen) : strlen(listen);
    snprintf(out, len, "%.*s", (int)n, listen);
}

/* See listen.h. */
as_err listen_resolve(const char *listen, struct sockaddr_storage *ss, socklen_t *sslen, bool *v6,
                      as_diag *diag)
{
    if (!listen || !*listen)
        return as_diag_set(diag, AS_EINVAL, "listen", "listen address is empty; use HOST:PORT");
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon)
        return as_diag_set(diag, AS_EINVAL, "listen",
                           "listen address '%s' has no port; use HOST:PORT (e.g. 127.0.0.1:8888)",
                           listen);
    size_t hlen = (size_t)(colon - listen);
    const char *h = listen;
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof host)
        return as_diag_set(diag, AS_EINVAL, "listen", "listen host in '%s' is too long", listen);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    const char *port = colon + 1;
    char *end = NULL;
    errno = 0;
    long p = strtol(port, &end, 10);
    if (!*port || errno || *end || p < 0 || p > 65535)
        return as_diag_set(diag, AS_EINVAL, "listen",
                           "listen port '%s' in '%s' is not a number in 0..65535", port, listen);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(hlen ? host : NULL, port, &hints, &res);
    if (rc != 0 || !res)
        return as_diag_set(diag, AS_EINVAL, "listen", "cannot resolve listen host '%s': %s", host,
                           gai_strerror(rc));
    /* Prefer IPv4 when a name resolves to both (localhost). */
    struct addrinfo *pick = res;
    for (struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *sslen = pick->ai_addrlen;
    *v6 = pick->ai_family == AF_INET6;
    freeaddrinfo(res);
    return AS_OK;
}
