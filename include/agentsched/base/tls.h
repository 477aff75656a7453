/*
 * tls.h - the server's TLS credentials and the check of a client's
 * certificate (GnuTLS).
 *
 * One generation of credentials is the serving chain and key handed to each
 * new handshake, and the client CA requests are checked against. A
 * generation is reference-counted and immutable once published: the HTTP
 * server holds the current one, each connection the one it was handshaken
 * with (GnuTLS keeps pointers to the chain and key for the session's life),
 * so a reload swaps generations without touching open connections.
 */
#ifndef AGENTSCHED_TLS_H
#define AGENTSCHED_TLS_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentsched/base/error.h"

/* Certificates in a serving chain and in a client's chain looked at. */
#define TLS_MAX_CHAIN 16

typedef struct tls_creds tls_creds;

/* tls_creds_load parses one generation (PEM texts, each at most 16 MiB;
 * ca_pem NULL = no client authentication) into *out, with one reference.
 * omit_ca_names: offer no CA names in the handshake (they would be stale:
 * libmicrohttpd keeps the names of the CA it started with). AS_EINVAL with
 * diag naming tls-cert, tls-key or tls-client-ca for what GnuTLS refuses
 * (a key that does not match the leaf included); AS_ENOMEM. */
as_err tls_creds_load(const char *cert_pem, const char *key_pem, const char *ca_pem,
                      bool omit_ca_names, tls_creds **out, as_diag *diag);

/* tls_creds_ref adds a reference and returns t; tls_creds_unref drops one
 * and frees t with the last. Both NULL-safe and thread-safe. */
tls_creds *tls_creds_ref(tls_creds *t);
void tls_creds_unref(tls_creds *t);

/* tls_creds_gen: the generation number (0 for NULL); tls_creds_set_gen
 * numbers t before it is published (1, 2, ... in order of loading). */
unsigned tls_creds_gen(const tls_creds *t);
void tls_creds_set_gen(tls_creds *t, unsigned gen);

/* tls_creds_serve hands t's chain and key to a handshake of session (a
 * GnuTLS certificate-retrieve callback's answer): 0, or -1 for NULL t. */
int tls_creds_serve(const tls_creds *t, gnutls_session_t session, gnutls_pcert_st **pcert,
                    unsigned int *pcert_length, gnutls_privkey_t *pkey);

/* tls_verify_client checks the client certificate session presented
 * against t's client CA: valid now, allowed for TLS client use, chaining to
 * the CA. Returns 0 (verified: cn[0..cnlen) holds its subject CN, "" when
 * none, as the certificate has it), 401 (no certificate) or 403 (does not
 * verify, or t checks no client certificates); why[0..whylen) then says
 * what to present. session may be NULL (no TLS): 401 or 403. */
int tls_verify_client(const tls_creds *t, gnutls_session_t session, char *cn, size_t cnlen,
                      char *why, size_t whylen);

#endif
