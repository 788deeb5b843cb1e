/* UTF-8 <-> UTF-16LE for names on the wire ([MS-SMB2] 2.2.13: names are UTF-16LE). */
#ifndef SMB_SRV_UTF16_H
#define SMB_SRV_UTF16_H

#include <stddef.h>
#include <stdint.h>

/* Encodes s as UTF-16LE into out (cap bytes), ASCII letters upper-cased when upper; the byte
 * count, or (size_t)-1 when s is not valid UTF-8 or out is too small. */
size_t srv_utf8_to_utf16(const char *s, uint8_t *out, size_t cap, int upper);

/* Decodes len bytes of UTF-16LE into a NUL-terminated UTF-8 string; -1 when len is odd, a
 * surrogate is unpaired, the text holds a NUL, or out (cap bytes) is too small. */
int srv_utf16_to_utf8(const uint8_t *in, size_t len, char *out, size_t cap);

#endif
