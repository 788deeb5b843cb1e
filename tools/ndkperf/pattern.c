/* -c pattern: 64-bit words of a per-message key; a shorter message is a prefix of a longer one.
 * Filled by the sender (and into every landing slot at set-up), checked by the receiver. */
#include <stdio.h>
#include <string.h>

#include "ndkperf.h"

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline uint64_t pattern_key(uint64_t iter, unsigned qp)
{
    return mix64(iter * 0x9E3779B97F4A7C15ull + ((uint64_t)qp << 48) + 1);
}

void pattern_fill(uint8_t *buf, size_t len, uint64_t iter, unsigned qp)
{
    uint64_t key = pattern_key(iter, qp);
    size_t words = len / 8;
    for (size_t j = 0; j < words; j++) {
        uint64_t w = key ^ (j * 0xD6E8FEB86659FD93ull);
        memcpy(buf + j * 8, &w, 8);
    }
    if (len % 8) {
        uint64_t w = key ^ (words * 0xD6E8FEB86659FD93ull);
        memcpy(buf + words * 8, &w, len % 8);
    }
}

size_t pattern_check(const uint8_t *buf, size_t len, uint64_t iter, unsigned qp)
{
    uint64_t key = pattern_key(iter, qp);
    size_t words = len / 8;
    for (size_t j = 0; j < words; j++) {
        uint64_t w = key ^ (j * 0xD6E8FEB86659FD93ull), got;
        memcpy(&got, buf + j * 8, 8);
        if (got != w)
            for (size_t b = 0; b < 8; b++)
                if (buf[j * 8 + b] != ((const uint8_t *)&w)[b])
                    return j * 8 + b;
    }
    if (len % 8) {
        uint64_t w = key ^ (words * 0xD6E8FEB86659FD93ull);
        for (size_t b = 0; b < len % 8; b++)
            if (buf[words * 8 + b] != ((const uint8_t *)&w)[b])
                return words * 8 + b;
    }
    return (size_t)-1;
}

uint8_t pattern_expected(size_t off, uint64_t iter, unsigned qp)
{
    uint8_t b[8];
    uint64_t w = pattern_key(iter, qp) ^ ((off / 8) * 0xD6E8FEB86659FD93ull);
    memcpy(b, &w, 8);
    return b[off % 8];
}
