/*
 * utf8.h - the one strict UTF-8 validator (RFC 3629) every decoder uses:
 * no overlong forms, no surrogates, nothing past U+10FFFF. yajl and the
 * YAML reader check the byte structure only, so text they hand over is
 * held to this before anyone keeps it.
 */
#ifndef AGENTSCHED_UTF8_H
#define AGENTSCHED_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * utf8_seq_len validates the multi-byte sequence at p (p < end,
 * p[0] >= 0x80) and returns its length, 2 to 4; 0 when it is invalid or
 * runs past end.
 */
size_t utf8_seq_len(const unsigned char *p, const unsigned char *end);

/*
 * utf8_prefix returns how many leading bytes of s[0..len) are whole,
 * valid UTF-8 characters (NUL counts as valid): len when all of s is
 * valid, else the offset of the first invalid sequence.
 */
size_t utf8_prefix(const char *s, size_t len);

/*
 * utf8_put writes the UTF-8 form of code point cp (at most U+10FFFF, not a
 * surrogate) to o, which has room for 4 bytes, and returns its length.
 */
size_t utf8_put(char *o, uint32_t cp);

#endif
