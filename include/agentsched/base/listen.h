/*
 * listen.h - the address a server listens on, from its "HOST:PORT" text.
 */
#ifndef AGENTSCHED_LISTEN_H
#define AGENTSCHED_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "agentsched/base/error.h"

/*
 * listen_resolve splits listen ("HOST:PORT", "[V6]:PORT" or ":PORT", the
 * last meaning every address) and resolves the host (numeric or a name;
 * IPv4 preferred when a name has both). On AS_OK fills *ss, *sslen and *v6
 * (an IPv6 address). On AS_EINVAL (empty, no port, a port outside 0..65535,
 * a host that does not resolve) diag names the field "listen" and says what
 * to write instead; nothing else is touched.
 */
as_err listen_resolve(const char *listen, struct sockaddr_storage *ss, socklen_t *sslen, bool *v6,
                      as_diag *diag);

/*
 * listen_host copies the host of listen ("HOST:PORT": the text before the
 * last ':', brackets of "[V6]" kept, so that it fits in a URL; "" for
 * ":PORT") into out[0..len), truncated and NUL-terminated. For log lines
 * and URLs of an address already accepted.
 */
void listen_host(const char *listen, char *out, size_t len);

#endif
