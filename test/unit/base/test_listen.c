/* test_listen.c - listen addresses: the forms a --listen flag takes, and
 * each way one is wrong named in the diagnostic. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>

#include "agentsched/base/listen.h"

Test(listen, ipv4_host_and_port)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;
    bool v6 = true;
    as_diag d = {0};
    cr_assert_eq(listen_resolve("127.0.0.1:8888", &ss, &len, &v6, &d), AS_OK, "%s", d.msg);
    const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
    cr_expect_eq(in->sin_family, AF_INET);
    cr_expect_eq(ntohs(in->sin_port), 8888);
    cr_expect_eq(ntohl(in->sin_addr.s_addr), 0x7f000001u);
    cr_expect_eq(len, sizeof(struct sockaddr_in));
    cr_expect_not(v6);
}

Test(listen, bracketed_ipv6_and_wildcard)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;
    bool v6 = false;
    as_diag d = {0};
    cr_assert_eq(listen_resolve("[::1]:0", &ss, &len, &v6, &d), AS_OK, "%s", d.msg);
    cr_expect(v6);
    cr_expect_eq(((const struct sockaddr_in6 *)&ss)->sin6_family, AF_INET6);
    /* ":PORT": every address, the passive wildcard. */
    cr_assert_eq(listen_resolve(":9000", &ss, &len, &v6, &d), AS_OK, "%s", d.msg);
}

Test(listen, each_mistake_is_named)
{
    static const struct {
        const char *in, *says;
    } bad[] = {
        {"", "empty"},
        {"127.0.0.1", "no port"},
        {"127.0.0.1:", "not a number"},
        {"127.0.0.1:65536", "not a number"},
        {"127.0.0.1:-1", "not a number"},
        {"127.0.0.1:80x", "not a number"},
        {"no-such-host.invalid:80", "cannot resolve"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sockaddr_storage ss;
        socklen_t len = 0;
        bool v6 = false;
        as_diag d = {0};
        cr_expect_eq(listen_resolve(bad[i].in, &ss, &len, &v6, &d), AS_EINVAL, "%s", bad[i].in);
        cr_expect_str_eq(d.field, "listen", "%s", bad[i].in);
        cr_expect(strstr(d.msg, bad[i].says) != NULL, "%s: %s", bad[i].in, d.msg);
    }
    cr_expect_eq(listen_resolve(NULL, NULL, NULL, NULL, NULL), AS_EINVAL);
}

/* The host as written, for log lines and URLs. */
Test(listen, host_as_written)
{
    char h[16];
    listen_host("127.0.0.1:8888", h, sizeof h);
    cr_assert_str_eq(h, "127.0.0.1");
    listen_host("[::1]:0", h, sizeof h);
    cr_assert_str_eq(h, "[::1]");
    listen_host(":8889", h, sizeof h);
    cr_assert_str_eq(h, "");
    listen_host("a-very-long-host-name:1", h, sizeof h);
    cr_assert_str_eq(h, "a-very-long-hos", "truncated to the buffer");
}
