/* test_hash.c - the string hash and the span hash: every byte counts, no
 * byte past the end is read, and hash_str agrees with hash_bytes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/hash.h"

Test(hash, str_is_bytes_over_the_string)
{
    static const char *const s[] = {"",
                                    "a",
                                    "ab",
                                    "abc",
                                    "node",
                                    "node-1",
                                    "gpu-node-0012",
                                    "a-rather-long-node-name.example.internal"};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        cr_expect_eq(hash_str(s[i]), hash_bytes(s[i], strlen(s[i])), "%s", s[i]);
    cr_expect_eq(hash_str(NULL), hash_bytes("", 0));
}

Test(hash, every_byte_and_the_length_count)
{
    char buf[40];
    memset(buf, 'n', sizeof buf);
    for (size_t len = 1; len <= 32; len++) {
        uint64_t base = hash_bytes(buf, len);
        cr_expect_neq(base, hash_bytes(buf, len - 1), "len %zu vs %zu", len, len - 1);
        for (size_t i = 0; i < len; i++) {
            buf[i] = 'm';
            cr_expect_neq(hash_bytes(buf, len), base, "len %zu byte %zu", len, i);
            buf[i] = 'n';
        }
    }
}

Test(hash, reads_nothing_past_the_end)
{
    /* The bytes after len differ; the hashes must not. */
    char a[24], b[24];
    for (size_t len = 0; len <= 16; len++) {
        memset(a, 'x', sizeof a);
        memset(b, 'y', sizeof b);
        memset(a, 'k', len);
        memset(b, 'k', len);
        cr_expect_eq(hash_bytes(a, len), hash_bytes(b, len), "len %zu", len);
    }
}

Test(hash, span_every_byte_the_length_and_nothing_past_the_end)
{
    /* hash_span: below 64 bytes via hash_bytes, from 64 by lanes, a tail
     * and the length; every byte of a 40 KB-like span counts */
    enum { MAX = 200 };
    char a[MAX + 8], b[MAX + 8];
    for (size_t len = 0; len <= MAX; len += len < 80 ? 1 : 7) {
        memset(a, 'n', sizeof a);
        memset(b, 'n', len);
        memset(b + len, 'z', sizeof b - len);
        uint64_t base = hash_span(a, len);
        cr_expect_eq(base, hash_span(b, len), "len %zu: a byte past the end counted", len);
        if (len)
            cr_expect_neq(base, hash_span(a, len - 1), "len %zu vs %zu", len, len - 1);
        for (size_t i = 0; i < len; i++) {
            a[i] = 'm';
            cr_expect_neq(hash_span(a, len), base, "len %zu byte %zu", len, i);
            a[i] = 'n';
        }
    }
}
