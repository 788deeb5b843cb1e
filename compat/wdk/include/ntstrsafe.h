/*
 * ntstrsafe.h — bounded string routines (softndk kernel-consumer harness). Every result is
 * NUL-terminated; a result that did not fit is truncated and returns STATUS_BUFFER_OVERFLOW
 * (a warning: NT_SUCCESS is false for it, as on Windows); a size of 0 or above
 * NTSTRSAFE_MAX_CCH, or a NULL pointer, is STATUS_INVALID_PARAMETER. The printf forms take
 * Windows' conversions (%ld is 32-bit, %I64d, %ws, %wZ...: those of DbgPrint). Provided: the
 * A forms of Printf/VPrintf/Copy/CopyN/Cat/Length, the W forms of Copy/Cat/Length; not the W
 * printf forms (a driver using them fails to compile, naming them).
 */
#ifndef SOFTNDK_WDK_NTSTRSAFE_H
#define SOFTNDK_WDK_NTSTRSAFE_H

#include "wdm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NTSTRSAFE_MAX_CCH 2147483647
typedef char *NTSTRSAFE_PSTR;
typedef const char *NTSTRSAFE_PCSTR;
typedef WCHAR *NTSTRSAFE_PWSTR;
typedef const WCHAR *NTSTRSAFE_PCWSTR;

SOFTNDK_WDK_API NTSTATUS RtlStringCbVPrintfA(PSTR pszDest, size_t cbDest, PCSTR pszFormat,
                                             va_list argList);

static inline NTSTATUS RtlStringCchVPrintfA(PSTR pszDest, size_t cchDest, PCSTR pszFormat,
                                            va_list argList)
{
    return RtlStringCbVPrintfA(pszDest, cchDest, pszFormat, argList);
}

static inline __attribute__((unused)) NTSTATUS RtlStringCbPrintfA(PSTR pszDest, size_t cbDest,
                                                                  PCSTR pszFormat, ...)
{
    va_list ap;
    va_start(ap, pszFormat);
    NTSTATUS st = RtlStringCbVPrintfA(pszDest, cbDest, pszFormat, ap);
    va_end(ap);
    return st;
}

static inline __attribute__((unused)) NTSTATUS RtlStringCchPrintfA(PSTR pszDest, size_t cchDest,
                                                                   PCSTR pszFormat, ...)
{
    va_list ap;
    va_start(ap, pszFormat);
    NTSTATUS st = RtlStringCbVPrintfA(pszDest, cchDest, pszFormat, ap);
    va_end(ap);
    return st;
}

/* The shared body of Copy/CopyN/Cat: append at most max source units at dst[at]. */
#define SOFTNDK_WDK_STRSAFE_APPEND(T, dst, cch, at, src, max)                                      \
    do {                                                                                           \
        size_t i_ = 0;                                                                             \
        while ((at) + i_ + 1 < (cch) && i_ < (max) && (src)[i_]) {                                 \
            (dst)[(at) + i_] = (src)[i_];                                                          \
            i_++;                                                                                  \
        }                                                                                          \
        (dst)[(at) + i_] = (T)0;                                                                   \
        return i_ < (max) && (src)[i_] ? STATUS_BUFFER_OVERFLOW : STATUS_SUCCESS;                  \
    } while (0)

FORCEINLINE NTSTATUS RtlStringCchCopyNA(PSTR pszDest, size_t cchDest, PCSTR pszSrc,
                                        size_t cchToCopy)
{
    if (!pszDest || !pszSrc || cchDest == 0 || cchDest > NTSTRSAFE_MAX_CCH)
        return STATUS_INVALID_PARAMETER;
    SOFTNDK_WDK_STRSAFE_APPEND(CHAR, pszDest, cchDest, 0, pszSrc, cchToCopy);
}
FORCEINLINE NTSTATUS RtlStringCchCopyA(PSTR pszDest, size_t cchDest, PCSTR pszSrc)
{
    return RtlStringCchCopyNA(pszDest, cchDest, pszSrc, NTSTRSAFE_MAX_CCH);
}
FORCEINLINE NTSTATUS RtlStringCbCopyA(PSTR pszDest, size_t cbDest, PCSTR pszSrc)
{
    return RtlStringCchCopyNA(pszDest, cbDest, pszSrc, NTSTRSAFE_MAX_CCH);
}
FORCEINLINE NTSTATUS RtlStringCbCopyNA(PSTR pszDest, size_t cbDest, PCSTR pszSrc, size_t cbToCopy)
{
    return RtlStringCchCopyNA(pszDest, cbDest, pszSrc, cbToCopy);
}
FORCEINLINE NTSTATUS RtlStringCchLengthA(PCSTR psz, size_t cchMax, size_t *pcchLength)
{
    size_t n = 0;
    if (!psz || cchMax == 0 || cchMax > NTSTRSAFE_MAX_CCH) {
        if (pcchLength)
            *pcchLength = 0;
        return STATUS_INVALID_PARAMETER;
    }
    while (n < cchMax && psz[n])
        n++;
    if (pcchLength)
        *pcchLength = n < cchMax ? n : 0;
    return n < cchMax ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
}
FORCEINLINE NTSTATUS RtlStringCbLengthA(PCSTR psz, size_t cbMax, size_t *pcbLength)
{
    return RtlStringCchLengthA(psz, cbMax, pcbLength);
}
FORCEINLINE NTSTATUS RtlStringCchCatA(PSTR pszDest, size_t cchDest, PCSTR pszSrc)
{
    size_t at;
    if (!pszSrc || RtlStringCchLengthA(pszDest, cchDest, &at) != STATUS_SUCCESS)
        return STATUS_INVALID_PARAMETER;
    SOFTNDK_WDK_STRSAFE_APPEND(CHAR, pszDest, cchDest, at, pszSrc, NTSTRSAFE_MAX_CCH);
}
FORCEINLINE NTSTATUS RtlStringCbCatA(PSTR pszDest, size_t cbDest, PCSTR pszSrc)
{
    return RtlStringCchCatA(pszDest, cbDest, pszSrc);
}

FORCEINLINE NTSTATUS RtlStringCchCopyNW(PWSTR pszDest, size_t cchDest, PCWSTR pszSrc,
                                        size_t cchToCopy)
{
    if (!pszDest || !pszSrc || cchDest == 0 || cchDest > NTSTRSAFE_MAX_CCH)
        return STATUS_INVALID_PARAMETER;
    SOFTNDK_WDK_STRSAFE_APPEND(WCHAR, pszDest, cchDest, 0, pszSrc, cchToCopy);
}
FORCEINLINE NTSTATUS RtlStringCchCopyW(PWSTR pszDest, size_t cchDest, PCWSTR pszSrc)
{
    return RtlStringCchCopyNW(pszDest, cchDest, pszSrc, NTSTRSAFE_MAX_CCH);
}
FORCEINLINE NTSTATUS RtlStringCbCopyW(PWSTR pszDest, size_t cbDest, PCWSTR pszSrc)
{
    return RtlStringCchCopyNW(pszDest, cbDest / sizeof(WCHAR), pszSrc, NTSTRSAFE_MAX_CCH);
}
FORCEINLINE NTSTATUS RtlStringCchLengthW(PCWSTR psz, size_t cchMax, size_t *pcchLength)
{
    size_t n = 0;
    if (!psz || cchMax == 0 || cchMax > NTSTRSAFE_MAX_CCH) {
        if (pcchLength)
            *pcchLength = 0;
        return STATUS_INVALID_PARAMETER;
    }
    while (n < cchMax && psz[n])
        n++;
    if (pcchLength)
        *pcchLength = n < cchMax ? n : 0;
    return n < cchMax ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
}
FORCEINLINE NTSTATUS RtlStringCbLengthW(PCWSTR psz, size_t cbMax, size_t *pcbLength)
{
    size_t cch = 0;
    NTSTATUS st = RtlStringCchLengthW(psz, cbMax / sizeof(WCHAR), &cch);
    if (pcbLength)
        *pcbLength = cch * sizeof(WCHAR);
    return st;
}
FORCEINLINE NTSTATUS RtlStringCchCatW(PWSTR pszDest, size_t cchDest, PCWSTR pszSrc)
{
    size_t at;
    if (!pszSrc || RtlStringCchLengthW(pszDest, cchDest, &at) != STATUS_SUCCESS)
        return STATUS_INVALID_PARAMETER;
    SOFTNDK_WDK_STRSAFE_APPEND(WCHAR, pszDest, cchDest, at, pszSrc, NTSTRSAFE_MAX_CCH);
}
FORCEINLINE NTSTATUS RtlStringCbCatW(PWSTR pszDest, size_t cbDest, PCWSTR pszSrc)
{
    return RtlStringCchCatW(pszDest, cbDest / sizeof(WCHAR), pszSrc);
}

#ifdef __cplusplus
}
#endif

#endif /* SOFTNDK_WDK_NTSTRSAFE_H */
