/*
 * tls.c - see tls.h.
 */
#include "agentsched/base/tls.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest PEM text taken (GnuTLS sizes are unsigned). */
#define TLS_MAX_PEM ((size_t)16 << 20)

/* One generation of TLS credentials: the serving chain and key handed to
 * each new handshake, and the client CA requests are checked against.
 * Reference-counted: the server holds the current generation, each
 * connection the one it was handshaken with, since GnuTLS keeps pointers
 * to the chain and key for the session's life. */
struct tls_creds {
    int refs; /* atomic */
    gnutls_pcert_st chain[TLS_MAX_CHAIN];
    unsigned nchain;
    gnutls_privkey_t key;
    gnutls_x509_trust_list_t ca; /* NULL without client authentication */
    unsigned gen;                /* 1, 2, ... in the order they were made */
    /* The CA names the handshake offers to clients come from the CA the
     * daemon started with (libmicrohttpd cannot change them); once the CA
     * was replaced they would be stale, so none are offered. */
    bool omit_ca_names;
};

/* See tls.h. */
void tls_creds_unref(tls_creds *t)
{
    if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (unsigned i = 0; i < t->nchain; i++)
        gnutls_pcert_deinit(&t->chain[i]);
    if (t->key)
        gnutls_privkey_deinit(t->key);
    if (t->ca)
        gnutls_x509_trust_list_deinit(t->ca, 1);
    free(t);
}

/* See tls.h. */
tls_creds *tls_creds_ref(tls_creds *t)
{
    if (t)
        __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

/* See tls.h. */
unsigned tls_creds_gen(const tls_creds *t)
{
    return t ? t->gen : 0;
}

/* See tls.h. */
void tls_creds_set_gen(tls_creds *t, unsigned gen)
{
    t->gen = gen;
}

/* See tls.h. */
int tls_creds_serve(const tls_creds *t, gnutls_session_t session, gnutls_pcert_st **pcert,
                    unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
    if (!t)
        return -1;
    if (t->omit_ca_names)
        gnutls_certificate_send_x509_rdn_sequence(session, 1);
    *pcert = (gnutls_pcert_st *)t->chain;
    *pcert_length = t->nchain;
    *pkey = t->key;
    return 0;
}

static gnutls_datum_t tls_datum(const char *pem)
{
    return (gnutls_datum_t){(unsigned char *)pem, (unsigned)strlen(pem)};
}

/* See tls.h. */
as_err tls_creds_load(const char *cert_pem, const char *key_pem, const char *ca_pem,
                      bool omit_ca_names, tls_creds **out, as_diag *diag)
{
    *out = NULL;
    if (strlen(cert_pem) > TLS_MAX_PEM || strlen(key_pem) > TLS_MAX_PEM ||
        (ca_pem && strlen(ca_pem) > TLS_MAX_PEM))
        return as_diag_set(diag, AS_EINVAL, "tls-cert", "a TLS PEM file is over %zu bytes",
                           TLS_MAX_PEM);
    as_err err = AS_OK;
    gnutls_certificate_credentials_t check = NULL;
    tls_creds *t = calloc(1, sizeof *t);
    if (!t)
        return AS_ENOMEM;
    t->refs = 1;
    t->omit_ca_names = omit_ca_names;
    gnutls_datum_t cd = tls_datum(cert_pem), kd = tls_datum(key_pem);
    /* GnuTLS's own pairing check, the one a daemon started with the PEM
     * texts would make: a key that does not match the leaf is refused. */
    int rc = gnutls_certificate_allocate_credentials(&check);
    if (rc < 0) {
        check = NULL;
        err = AS_ENOMEM;
        goto done;
    }
    rc = gnutls_certificate_set_x509_key_mem(check, &cd, &kd, GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        err = as_diag_set(diag, AS_EINVAL,
                          rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH ? "tls-key" : "tls-cert",
                          "the TLS certificate or key was refused (%s); give a PEM certificate "
                          "and the PEM private key that matches it",
                          gnutls_strerror(rc));
        goto done;
    }
    t->nchain = TLS_MAX_CHAIN;
    rc = gnutls_pcert_list_import_x509_raw(t->chain, &t->nchain, &cd, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) {
        t->nchain = 0;
        err = as_diag_set(diag, AS_EINVAL, "tls-cert",
                          "the TLS certificate chain was refused (%s); give at most %d PEM "
                          "certificates, leaf first",
                          gnutls_strerror(rc), TLS_MAX_CHAIN);
        goto done;
    }
    rc = gnutls_privkey_init(&t->key);
    if (rc < 0) {
        t->key = NULL;
        err = AS_ENOMEM;
        goto done;
    }
    rc = gnutls_privkey_import_x509_raw(t->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc < 0) {
        err = as_diag_set(diag, AS_EINVAL, "tls-key",
                          "the TLS private key was refused (%s); give an unencrypted PEM key",
                          gnutls_strerror(rc));
        goto done;
    }
    if (ca_pem) {
        rc = gnutls_x509_trust_list_init(&t->ca, 0);
        if (rc < 0) {
            t->ca = NULL;
            err = AS_ENOMEM;
            goto done;
        }
        gnutls_datum_t ad = tls_datum(ca_pem);
        rc = gnutls_x509_trust_list_add_trust_mem(t->ca, &ad, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
        if (rc <= 0) {
            err = as_diag_set(diag, AS_EINVAL, "tls-client-ca",
                              "the client CA file holds no usable PEM certificate (%s)",
                              rc < 0 ? gnutls_strerror(rc) : "none found");
            goto done;
        }
    }
    *out = t;
    t = NULL;
done:
    if (check)
        gnutls_certificate_free_credentials(check);
    tls_creds_unref(t);
    return err;
}

/* See tls.h. */
int tls_verify_client(const tls_creds *cur, gnutls_session_t session, char *cn, size_t cnlen,
                      char *why, size_t whylen)
{
    gnutls_x509_crt_t crts[TLS_MAX_CHAIN];
    unsigned ncrt = 0;
    int status = 403;
    cn[0] = '\0';
    why[0] = '\0';
    unsigned n = 0;
    const gnutls_datum_t *peers = session ? gnutls_certificate_get_peers(session, &n) : NULL;
    if (!cur || !cur->ca) {
        snprintf(why, whylen, "client certificates are not checked by this server");
        goto done;
    }
    if (!peers || n == 0) {
        status = 401;
        snprintf(why, whylen,
                 "a client certificate is required: present one issued by the CA of "
                 "--tls-client-ca (kube-scheduler: the extender's tlsConfig certFile/keyFile)");
        goto done;
    }
    if (n > TLS_MAX_CHAIN) {
        snprintf(why, whylen, "the client certificate chain has %u certificates, more than %d", n,
                 TLS_MAX_CHAIN);
        goto done;
    }
    bool parsed = true;
    for (; parsed && ncrt < n; ncrt++) {
        if (gnutls_x509_crt_init(&crts[ncrt]) < 0)
            break;
        parsed = gnutls_x509_crt_import(crts[ncrt], &peers[ncrt], GNUTLS_X509_FMT_DER) >= 0;
    }
    if (!parsed || ncrt < n) {
        snprintf(why, whylen, "the client certificate cannot be parsed");
        goto done;
    }
    gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                     .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
    unsigned vs = 0;
    int rc = gnutls_x509_trust_list_verify_crt2(cur->ca, crts, ncrt, &purpose, 1, 0, &vs, NULL);
    if (rc < 0 || vs != 0) {
        gnutls_datum_t txt = {0};
        bool printed =
            rc >= 0 &&
            gnutls_certificate_verification_status_print(vs, GNUTLS_CRT_X509, &txt, 0) >= 0 &&
            txt.data;
        snprintf(why, whylen,
                 "the client certificate does not verify against --tls-client-ca (%s); present "
                 "one issued by that CA, valid now and allowed for TLS client use",
                 printed ? (const char *)txt.data : gnutls_strerror(rc));
        gnutls_free(txt.data);
        goto done;
    }
    status = 0;
    size_t len = cnlen;
    if (gnutls_x509_crt_get_dn_by_oid(crts[0], GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &len) != 0)
        cn[0] = '\0';
done:
    for (unsigned i = 0; i < ncrt; i++)
        gnutls_x509_crt_deinit(crts[i]);
    return status;
}
