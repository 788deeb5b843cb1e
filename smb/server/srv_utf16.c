/* UTF-8 <-> UTF-16LE (RFC 3629, RFC 2781), strict: no overlong forms, no lone surrogates. */
#include "srv_utf16.h"

static int put16(uint8_t *out, size_t cap, size_t *n, uint32_t u)
{
    if (*n + 2 > cap)
        return -1;
    out[(*n)++] = (uint8_t)u;
    out[(*n)++] = (uint8_t)(u >> 8);
    return 0;
}

size_t srv_utf8_to_utf16(const char *s, uint8_t *out, size_t cap, int upper)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (*p) {
        uint32_t u;
        unsigned more;
        if (*p < 0x80) {
            u = *p;
            more = 0;
            if (upper && u >= 'a' && u <= 'z')
                u -= 'a' - 'A';
        } else if ((*p & 0xE0) == 0xC0) {
            u = *p & 0x1Fu;
            more = 1;
        } else if ((*p & 0xF0) == 0xE0) {
            u = *p & 0x0Fu;
            more = 2;
        } else if ((*p & 0xF8) == 0xF0) {
            u = *p & 0x07u;
            more = 3;
        } else {
            return (size_t)-1;
        }
        p++;
        for (unsigned i = 0; i < more; i++, p++) {
            if ((*p & 0xC0) != 0x80)
                return (size_t)-1;
            u = u << 6 | (*p & 0x3Fu);
        }
        static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
        if (u < min[more] || u > 0x10FFFF || (u >= 0xD800 && u <= 0xDFFF))
            return (size_t)-1;
        if (u >= 0x10000) {
            u -= 0x10000;
            if (put16(out, cap, &n, 0xD800 | u >> 10) || put16(out, cap, &n, 0xDC00 | (u & 0x3FF)))
                return (size_t)-1;
        } else if (put16(out, cap, &n, u)) {
            return (size_t)-1;
        }
    }
    return n;
}

int srv_utf16_to_utf8(const uint8_t *in, size_t len, char *out, size_t cap)
{
    if (len % 2 || cap == 0)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 2) {
        uint32_t u = (uint32_t)in[i] | (uint32_t)in[i + 1] << 8;
        if (u >= 0xDC00 && u <= 0xDFFF)
            return -1;
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (i + 4 > len)
                return -1;
            uint32_t lo = (uint32_t)in[i + 2] | (uint32_t)in[i + 3] << 8;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return -1;
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            i += 2;
        }
        if (u == 0)
            return -1;
        unsigned bytes = u < 0x80 ? 1 : u < 0x800 ? 2 : u < 0x10000 ? 3 : 4;
        if (n + bytes + 1 > cap)
            return -1;
        if (bytes == 1) {
            out[n++] = (char)u;
        } else {
            static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
            for (unsigned k = bytes; k-- > 1;)
                out[n + k] = (char)(0x80 | (u >> (6 * (bytes - 1 - k)) & 0x3F));
            out[n] = (char)(lead[bytes] | u >> (6 * (bytes - 1)));
            n += bytes;
        }
    }
    out[n] = 0;
    return 0;
}
