/*
 * ntintsafe.h — overflow-checked integer arithmetic (softndk kernel-consumer harness):
 * STATUS_SUCCESS with the result, or STATUS_INTEGER_OVERFLOW with the result set to the
 * type's error value (all ones), as Windows' header does.
 */
#ifndef SOFTNDK_WDK_NTINTSAFE_H
#define SOFTNDK_WDK_NTINTSAFE_H

#include "wdm.h"

#define ULONG_ERROR     0xffffffffUL
#define ULONGLONG_ERROR 0xffffffffffffffffULL
#define SIZET_ERROR     ((SIZE_T)-1)
#define USHORT_ERROR    0xffff
#define ULONG_PTR_ERROR ((ULONG_PTR)-1)

#define SOFTNDK_WDK_INTSAFE(name, T, op, err)                                                      \
    FORCEINLINE NTSTATUS name(T a, T b, T *r)                                                      \
    {                                                                                              \
        if (__builtin_##op##_overflow(a, b, r)) {                                                  \
            *r = (T)(err);                                                                         \
            return STATUS_INTEGER_OVERFLOW;                                                        \
        }                                                                                          \
        return STATUS_SUCCESS;                                                                     \
    }
SOFTNDK_WDK_INTSAFE(RtlULongAdd, ULONG, add, ULONG_ERROR)
SOFTNDK_WDK_INTSAFE(RtlULongSub, ULONG, sub, ULONG_ERROR)
SOFTNDK_WDK_INTSAFE(RtlULongMult, ULONG, mul, ULONG_ERROR)
SOFTNDK_WDK_INTSAFE(RtlULongLongAdd, ULONGLONG, add, ULONGLONG_ERROR)
SOFTNDK_WDK_INTSAFE(RtlULongLongSub, ULONGLONG, sub, ULONGLONG_ERROR)
SOFTNDK_WDK_INTSAFE(RtlULongLongMult, ULONGLONG, mul, ULONGLONG_ERROR)
SOFTNDK_WDK_INTSAFE(RtlSizeTAdd, SIZE_T, add, SIZET_ERROR)
SOFTNDK_WDK_INTSAFE(RtlSizeTSub, SIZE_T, sub, SIZET_ERROR)
SOFTNDK_WDK_INTSAFE(RtlSizeTMult, SIZE_T, mul, SIZET_ERROR)
SOFTNDK_WDK_INTSAFE(RtlULongPtrAdd, ULONG_PTR, add, ULONG_PTR_ERROR)
SOFTNDK_WDK_INTSAFE(RtlULongPtrMult, ULONG_PTR, mul, ULONG_PTR_ERROR)
SOFTNDK_WDK_INTSAFE(RtlUShortAdd, USHORT, add, USHORT_ERROR)
SOFTNDK_WDK_INTSAFE(RtlUShortMult, USHORT, mul, USHORT_ERROR)
#undef SOFTNDK_WDK_INTSAFE

#define SOFTNDK_WDK_INTSAFE_TO(name, From, To, max, err)                                           \
    FORCEINLINE NTSTATUS name(From v, To *r)                                                       \
    {                                                                                              \
        if (v > (From)(max)) {                                                                     \
            *r = (To)(err);                                                                        \
            return STATUS_INTEGER_OVERFLOW;                                                        \
        }                                                                                          \
        *r = (To)v;                                                                                \
        return STATUS_SUCCESS;                                                                     \
    }
SOFTNDK_WDK_INTSAFE_TO(RtlULongLongToULong, ULONGLONG, ULONG, 0xffffffffUL, ULONG_ERROR)
SOFTNDK_WDK_INTSAFE_TO(RtlSizeTToULong, SIZE_T, ULONG, 0xffffffffUL, ULONG_ERROR)
SOFTNDK_WDK_INTSAFE_TO(RtlULongLongToSizeT, ULONGLONG, SIZE_T, SIZET_ERROR, SIZET_ERROR)
SOFTNDK_WDK_INTSAFE_TO(RtlULongToUShort, ULONG, USHORT, 0xffffU, USHORT_ERROR)
SOFTNDK_WDK_INTSAFE_TO(RtlSizeTToUShort, SIZE_T, USHORT, 0xffffU, USHORT_ERROR)
#undef SOFTNDK_WDK_INTSAFE_TO

#endif /* SOFTNDK_WDK_NTINTSAFE_H */
