/* The kernel C runtime's wide-character string routines for 16-bit WCHAR (wdm.h, docs/wdk.md
 * "Wide characters"). Driver code reaches them by their Windows names, macros onto these. The
 * multibyte side is the "C" locale of Microsoft's C runtime: WCHARs 0 to 0xFF are the bytes 0 to
 * 0xFF; wcstombs / wctomb fail on anything above. Case folding (_wcsicmp, towlower) is ASCII's,
 * as in that locale. */
#include "wdk_internal.h"

#include <errno.h>
#include <limits.h>

size_t SoftNdkWdkCrt_wcslen(const WCHAR *S)
{
    size_t n = 0;
    while (S[n])
        n++;
    return n;
}

size_t SoftNdkWdkCrt_wcsnlen(const WCHAR *S, size_t Max)
{
    size_t n = 0;
    while (n < Max && S[n])
        n++;
    return n;
}

WCHAR *SoftNdkWdkCrt_wcscpy(WCHAR *Dest, const WCHAR *Src)
{
    size_t i = 0;
    do
        Dest[i] = Src[i];
    while (Src[i++]);
    return Dest;
}

/* C's contract: copies at most Count, pads with NULs, no NUL when Src is Count or longer. */
WCHAR *SoftNdkWdkCrt_wcsncpy(WCHAR *Dest, const WCHAR *Src, size_t Count)
{
    size_t i = 0;
    for (; i < Count && Src[i]; i++)
        Dest[i] = Src[i];
    for (; i < Count; i++)
        Dest[i] = 0;
    return Dest;
}

WCHAR *SoftNdkWdkCrt_wcscat(WCHAR *Dest, const WCHAR *Src)
{
    SoftNdkWdkCrt_wcscpy(Dest + SoftNdkWdkCrt_wcslen(Dest), Src);
    return Dest;
}

WCHAR *SoftNdkWdkCrt_wcsncat(WCHAR *Dest, const WCHAR *Src, size_t Count)
{
    WCHAR *d = Dest + SoftNdkWdkCrt_wcslen(Dest);
    size_t i = 0;
    for (; i < Count && Src[i]; i++)
        d[i] = Src[i];
    d[i] = 0;
    return Dest;
}

int SoftNdkWdkCrt_wcsncmp(const WCHAR *A, const WCHAR *B, size_t Count)
{
    for (size_t i = 0; i < Count; i++) {
        if (A[i] != B[i])
            return A[i] < B[i] ? -1 : 1;
        if (!A[i])
            break;
    }
    return 0;
}

int SoftNdkWdkCrt_wcscmp(const WCHAR *A, const WCHAR *B)
{
    return SoftNdkWdkCrt_wcsncmp(A, B, SIZE_MAX);
}

WCHAR SoftNdkWdkCrt_towlower(WCHAR C)
{
    return C >= 'A' && C <= 'Z' ? (WCHAR)(C + ('a' - 'A')) : C;
}

WCHAR SoftNdkWdkCrt_towupper(WCHAR C)
{
    return C >= 'a' && C <= 'z' ? (WCHAR)(C - ('a' - 'A')) : C;
}

/* MSVC compares the lowercased characters. */
int SoftNdkWdkCrt__wcsnicmp(const WCHAR *A, const WCHAR *B, size_t Count)
{
    for (size_t i = 0; i < Count; i++) {
        WCHAR a = SoftNdkWdkCrt_towlower(A[i]), b = SoftNdkWdkCrt_towlower(B[i]);
        if (a != b)
            return a < b ? -1 : 1;
        if (!a)
            break;
    }
    return 0;
}

int SoftNdkWdkCrt__wcsicmp(const WCHAR *A, const WCHAR *B)
{
    return SoftNdkWdkCrt__wcsnicmp(A, B, SIZE_MAX);
}

WCHAR *SoftNdkWdkCrt_wcschr(const WCHAR *S, WCHAR C)
{
    for (;; S++) {
        if (*S == C)
            return (WCHAR *)(uintptr_t)S;
        if (!*S)
            return NULL;
    }
}

WCHAR *SoftNdkWdkCrt_wcsrchr(const WCHAR *S, WCHAR C)
{
    const WCHAR *hit = NULL;
    for (;; S++) {
        if (*S == C)
            hit = S;
        if (!*S)
            return (WCHAR *)(uintptr_t)hit;
    }
}

WCHAR *SoftNdkWdkCrt_wcsstr(const WCHAR *S, const WCHAR *Find)
{
    size_t n = SoftNdkWdkCrt_wcslen(Find);
    for (; *S; S++)
        if (SoftNdkWdkCrt_wcsncmp(S, Find, n) == 0)
            return (WCHAR *)(uintptr_t)S;
    return n == 0 ? (WCHAR *)(uintptr_t)S : NULL;
}

/* strtoul's grammar on WCHARs (space, sign, 0x / 0 prefixes by Base); saturates with ERANGE. */
static unsigned long long wcs_to_integer(const WCHAR *S, WCHAR **End, int Base, bool *negative,
                                         bool *overflow)
{
    const WCHAR *p = S;
    *negative = false;
    *overflow = false;
    while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
        p++;
    if (*p == '+' || *p == '-')
        *negative = *p++ == '-';
    if ((Base == 0 || Base == 16) && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        p += 2;
        Base = 16;
    } else if (Base == 0) {
        Base = p[0] == '0' ? 8 : 10;
    }
    unsigned long long v = 0;
    const WCHAR *digits = p;
    for (;; p++) {
        unsigned d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'z')
            d = *p - 'a' + 10u;
        else if (*p >= 'A' && *p <= 'Z')
            d = *p - 'A' + 10u;
        else
            break;
        if (Base < 2 || Base > 36 || d >= (unsigned)Base)
            break;
        if (v > (ULLONG_MAX - d) / (unsigned)Base)
            *overflow = true;
        else
            v = v * (unsigned)Base + d;
    }
    if (End)
        *End = (WCHAR *)(uintptr_t)(p == digits ? S : p);
    return v;
}

long SoftNdkWdkCrt_wcstol(const WCHAR *S, WCHAR **End, int Base)
{
    bool neg, ovf;
    unsigned long long v = wcs_to_integer(S, End, Base, &neg, &ovf);
    if (ovf || v > (neg ? (unsigned long long)LONG_MAX + 1 : (unsigned long long)LONG_MAX)) {
        errno = ERANGE;
        return neg ? LONG_MIN : LONG_MAX;
    }
    return neg ? (long)(0 - v) : (long)v;
}

unsigned long SoftNdkWdkCrt_wcstoul(const WCHAR *S, WCHAR **End, int Base)
{
    bool neg, ovf;
    unsigned long long v = wcs_to_integer(S, End, Base, &neg, &ovf);
    if (ovf || v > ULONG_MAX) {
        errno = ERANGE;
        return ULONG_MAX;
    }
    return neg ? (unsigned long)(0 - v) : (unsigned long)v;
}

/* Dest NULL: the length it would take. Stops after Count bytes (no NUL then) or at the NUL. */
size_t SoftNdkWdkCrt_wcstombs(char *Dest, const WCHAR *Src, size_t Count)
{
    size_t i = 0;
    for (; !Dest || i < Count; i++) {
        if (Src[i] > 0xFF) {
            errno = EILSEQ;
            return (size_t)-1;
        }
        if (Dest)
            Dest[i] = (char)Src[i];
        if (!Src[i])
            return i;
    }
    return i;
}

size_t SoftNdkWdkCrt_mbstowcs(WCHAR *Dest, const char *Src, size_t Count)
{
    size_t i = 0;
    for (; !Dest || i < Count; i++) {
        if (Dest)
            Dest[i] = (unsigned char)Src[i];
        if (!Src[i])
            return i;
    }
    return i;
}

int SoftNdkWdkCrt_mbtowc(WCHAR *Dest, const char *Src, size_t Count)
{
    if (!Src)
        return 0; /* the "C" locale has no shift states */
    if (Count == 0)
        return -1;
    if (Dest)
        *Dest = (unsigned char)*Src;
    return *Src ? 1 : 0;
}

int SoftNdkWdkCrt_wctomb(char *Dest, WCHAR C)
{
    if (!Dest)
        return 0;
    if (C > 0xFF) {
        errno = EILSEQ;
        return -1;
    }
    *Dest = (char)C;
    return 1;
}
