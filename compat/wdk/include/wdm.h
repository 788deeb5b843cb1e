/*
 * wdm.h — the subset of the Windows kernel API that NDK consumer drivers use, on POSIX.
 *
 * Part of softndk's kernel-consumer harness (libsoftndk-wdk, docs/wdk.md): driver source that
 * includes <ntddk.h> / <wdm.h> / <ndis.h> / <wsk.h> / <wskndk.h> compiles unchanged against
 * these headers and runs in a Linux process on softndk. Names, types and semantics are
 * Windows'; binary layout is not (KEVENT, KSPIN_LOCK... are sized for this implementation).
 *
 * IRQL model (checked at run time, since the annotations are no-ops): threads of the driver
 * (the runner's thread that calls DriverEntry/DriverUnload, work-item threads) run at
 * PASSIVE_LEVEL; holding a spin lock raises to DISPATCH_LEVEL; every other thread (softndk's
 * progress threads, which deliver NDK callbacks) reports DISPATCH_LEVEL, the most a Windows
 * NDK callback may be called at. Blocking at DISPATCH_LEVEL is a bugcheck, as on Windows.
 */
#ifndef SOFTNDK_WDK_WDM_H
#define SOFTNDK_WDK_WDM_H

#include "sal.h"

#include <ndk/ndkpi.h> /* base NT types (ndkinfo.h), STATUS_* codes, the MDL */

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Compiler and calling-convention words (no calling conventions on x86-64 Linux). */
#if defined(__GNUC__)
#define SOFTNDK_WDK_API __attribute__((visibility("default")))
#define SOFTNDK_WDK_NORETURN __attribute__((noreturn))
#else
#define SOFTNDK_WDK_API
#define SOFTNDK_WDK_NORETURN
#endif
#ifndef NTAPI
#define NTAPI
#endif
#ifndef NTSYSAPI
#define NTSYSAPI
#endif
#ifndef NTKERNELAPI
#define NTKERNELAPI
#endif
#ifndef NTHALAPI
#define NTHALAPI
#endif
#ifndef FASTCALL
#define FASTCALL
#endif
#ifndef __stdcall
#define __stdcall
#endif
#ifndef __cdecl
#define __cdecl
#endif
#ifndef __fastcall
#define __fastcall
#endif
#ifndef FORCEINLINE
#define FORCEINLINE static inline __attribute__((always_inline))
#endif
#ifndef __forceinline
#define __forceinline inline __attribute__((always_inline))
#endif
#define DECLSPEC_ALIGN(x) __attribute__((aligned(x)))
#define POINTER_ALIGNMENT   DECLSPEC_ALIGN(8)
#define DECLSPEC_NOINLINE __attribute__((noinline))
#define DECLSPEC_NORETURN __attribute__((noreturn))
#define DECLSPEC_CACHEALIGN DECLSPEC_ALIGN(64)
#define DECLSPEC_IMPORT
#define DECLSPEC_EXPORT
#define DECLSPEC_SELECTANY  __attribute__((weak))
#define DECLSPEC_DEPRECATED __attribute__((deprecated))
/* MSVC's __declspec(...): each form drivers use maps onto its gcc/clang attribute through
 * SOFTNDK_DECLSPEC_<form> (the argument is pasted, not expanded: <stdnoreturn.h>'s noreturn
 * macro does not interfere). A form not listed is a compile error naming SOFTNDK_DECLSPEC_<form>.
 * dllexport gives default visibility (what a .so exports); dllimport is nothing (the dynamic
 * linker resolves imports); selectany is a weak definition (one of several identical ones is
 * kept, as MSVC's COMDAT folding does). */
#ifndef __declspec
#define __declspec(x) SOFTNDK_DECLSPEC_##x
#endif
#define SOFTNDK_DECLSPEC_dllexport __attribute__((visibility("default")))
#define SOFTNDK_DECLSPEC_dllimport
#define SOFTNDK_DECLSPEC_noinline   __attribute__((noinline))
#define SOFTNDK_DECLSPEC_noreturn   __attribute__((noreturn))
#define SOFTNDK_DECLSPEC_align(n)   __attribute__((aligned(n)))
#define SOFTNDK_DECLSPEC_selectany  __attribute__((weak))
#define SOFTNDK_DECLSPEC_deprecated __attribute__((deprecated))
#define SOFTNDK_DECLSPEC_thread     _Thread_local
#define SOFTNDK_DECLSPEC_restrict
#define SOFTNDK_DECLSPEC_noalias
#define SOFTNDK_DECLSPEC_novtable
#ifndef SYSTEM_CACHE_ALIGNMENT_SIZE
#define SYSTEM_CACHE_ALIGNMENT_SIZE 64
#endif
#ifdef __cplusplus
#define EXTERN_C extern "C"
#else
#define EXTERN_C extern
#endif
#ifndef CONST
#define CONST const
#endif
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef OPTIONAL
#define OPTIONAL
#endif
#ifndef NULL
#define NULL ((void *)0)
#endif
/* Checked build by default: NT_ASSERT and KdPrint are live, as a test harness wants them. */
#ifndef DBG
#define DBG 1
#endif

/* ------------------------------------------------------------------------------------------ */
/* Base types beyond those in ndkinfo.h (NTSTATUS, ULONG, LONG, USHORT, UCHAR, BOOLEAN,
 * UINT32, UINT64, ULONG64, SIZE_T, ULONG_PTR, KAFFINITY, PVOID, GUID, LARGE_INTEGER). WCHAR is
 * 16 bits as on Windows: compile driver code with -fshort-wchar so that L"..." literals are
 * WCHAR strings (the softndk::wdk target and softndk-wdk.pc add it). */
typedef char CHAR, *PCHAR, *PSTR, *LPSTR;
typedef const char *PCSTR, *LPCSTR, *PCSZ;
typedef int8_t CCHAR, INT8, *PINT8;
typedef int16_t SHORT, CSHORT, INT16, *PSHORT, *PINT16;
typedef int32_t INT, INT32, *PINT, *PINT32, *PLONG, *LPLONG;
typedef int64_t LONGLONG, LONG64, INT64, *PLONGLONG, *PLONG64, *PINT64;
typedef uint8_t UINT8, BYTE, *PUCHAR, *PUINT8, *PBYTE, *PBOOLEAN;
typedef uint16_t UINT16, WORD, *PUSHORT, *PUINT16, *PWORD;
typedef uint32_t UINT, DWORD, *PULONG, *PUINT, *PUINT32, *PDWORD, *LPDWORD;
typedef uint64_t ULONGLONG, DWORD64, QWORD, *PULONGLONG, *PULONG64, *PUINT64, *PDWORD64;
typedef intptr_t LONG_PTR, INT_PTR, SSIZE_T, *PLONG_PTR;
typedef uintptr_t UINT_PTR, DWORD_PTR, *PULONG_PTR, *PUINT_PTR;
typedef SIZE_T *PSIZE_T;
typedef ULONG LOGICAL, *PLOGICAL;
#if defined(__cplusplus) && defined(__SIZEOF_WCHAR_T__) && __SIZEOF_WCHAR_T__ == 2
typedef wchar_t WCHAR, *PWCHAR, *PWCH, *PWSTR, *LPWSTR; /* C++: L"..." is wchar_t */
#else
typedef uint16_t WCHAR, *PWCHAR, *PWCH, *PWSTR, *LPWSTR; /* C: with -fshort-wchar, the same type */
#endif
typedef const WCHAR *PCWCH, *PCWSTR, *LPCWSTR;

/* ------------------------------------------------------------------------------------------ */
/* The kernel C runtime's wide-character and printf routines, for 16-bit WCHAR (docs/wdk.md,
 * "Wide characters"). glibc's wide functions take a 32-bit wchar_t: with -fshort-wchar a driver
 * that reached them would link and silently read two WCHARs as one character. So the harness
 * implements them as SoftNdkWdkCrt_<name> and, in driver code, the Windows names are macros
 * onto those: every call, whatever was included first, goes to the 16-bit one. The harness ships
 * its own <wchar.h> (the one a driver's `#include <wchar.h>` finds: it includes this header), and
 * a driver that got glibc's <wchar.h> first stops here, at build time. The multibyte side is
 * Windows' "C" locale: characters 0 to 0xFF map to the bytes 0 to 0xFF (wcstombs fails with
 * (size_t)-1 on anything above). The printf forms take Windows' conversions (DbgPrint's); in
 * the wide ones %s and %c are wide and %S, %C, %hs narrow, as in MSVC. */
#if defined(_WCHAR_H) && !defined(SOFTNDK_WDK_INTERNAL)
#error                                                                                             \
    "softndk-wdk: glibc's <wchar.h> (32-bit wchar_t) was included before the harness headers; drivers use the harness's 16-bit wide-character routines: include <wdm.h> (or <wchar.h> from the harness include path) instead (docs/wdk.md, \"Wide characters\")"
#endif
SOFTNDK_WDK_API size_t SoftNdkWdkCrt_wcslen(const WCHAR *S);
SOFTNDK_WDK_API size_t SoftNdkWdkCrt_wcsnlen(const WCHAR *S, size_t Max);
SOFTNDK_WDK_API WCHAR *SoftNdkWdkCrt_wcscpy(WCHAR *Dest, const WCHAR *Src);
SOFTNDK_WDK_API WCHAR *SoftNdkWdkCrt_wcsncpy(WCHAR *Dest, const WCHAR *Src, size_t Count);
SOFTNDK_WDK_API WCHAR *SoftNdkWdkCrt_wcscat(WCHAR *Dest, const WCHAR *Src);
SOFTNDK_WDK_API WCHAR *SoftNdkWdkCrt_wcsncat(WCHAR *Dest, const WCHAR *Src, size_t Count);
SOFTNDK_WDK_API int SoftNdkWdkCrt_wcscmp(const WCHAR *A, const WCHAR *B);
SOFTNDK_WDK_API int SoftNdkWdkCrt_wcsncmp(const WCHAR *A, const WCHAR *B, size_t Count);
SOFTNDK_WDK_API int SoftNdkWdkCrt__wcsicmp(const WCHAR *A, const WCHAR *B);
SOFTNDK_WDK_API int SoftNdkWdkCrt__wcsnicmp(const WCHAR *A, const WCHAR *B, size_t Count);
SOFTNDK_WDK_API WCHAR *SoftNdkWdkCrt_wcschr(const WCHAR *S, WCHAR C);
SOFTNDK_WDK_API WCHAR *SoftNdkWdkCrt_wcsrchr(const WCHAR *S, WCHAR C);
SOFTNDK_WDK_API WCHAR *SoftNdkWdkCrt_wcsstr(const WCHAR *S, const WCHAR *Find);
SOFTNDK_WDK_API long SoftNdkWdkCrt_wcstol(const WCHAR *S, WCHAR **End, int Base);
SOFTNDK_WDK_API unsigned long SoftNdkWdkCrt_wcstoul(const WCHAR *S, WCHAR **End, int Base);
SOFTNDK_WDK_API size_t SoftNdkWdkCrt_wcstombs(char *Dest, const WCHAR *Src, size_t Count);
SOFTNDK_WDK_API size_t SoftNdkWdkCrt_mbstowcs(WCHAR *Dest, const char *Src, size_t Count);
SOFTNDK_WDK_API int SoftNdkWdkCrt_mbtowc(WCHAR *Dest, const char *Src, size_t Count);
SOFTNDK_WDK_API int SoftNdkWdkCrt_wctomb(char *Dest, WCHAR C);
SOFTNDK_WDK_API WCHAR SoftNdkWdkCrt_towlower(WCHAR C);
SOFTNDK_WDK_API WCHAR SoftNdkWdkCrt_towupper(WCHAR C);
SOFTNDK_WDK_API int SoftNdkWdkCrt__vsnprintf(char *Buffer, size_t Count, const char *Format,
                                             va_list Args);
SOFTNDK_WDK_API int SoftNdkWdkCrt__snprintf(char *Buffer, size_t Count, const char *Format, ...);
SOFTNDK_WDK_API int SoftNdkWdkCrt__vsnwprintf(WCHAR *Buffer, size_t Count, const WCHAR *Format,
                                              va_list Args);
SOFTNDK_WDK_API int SoftNdkWdkCrt__snwprintf(WCHAR *Buffer, size_t Count, const WCHAR *Format, ...);
SOFTNDK_WDK_API int SoftNdkWdkCrt_swprintf(WCHAR *Buffer, size_t Count, const WCHAR *Format, ...);
SOFTNDK_WDK_API int SoftNdkWdkCrt_vswprintf(WCHAR *Buffer, size_t Count, const WCHAR *Format,
                                            va_list Args);
#ifndef SOFTNDK_WDK_INTERNAL
#define wcslen      SoftNdkWdkCrt_wcslen
#define wcsnlen     SoftNdkWdkCrt_wcsnlen
#define wcscpy      SoftNdkWdkCrt_wcscpy
#define wcsncpy     SoftNdkWdkCrt_wcsncpy
#define wcscat      SoftNdkWdkCrt_wcscat
#define wcsncat     SoftNdkWdkCrt_wcsncat
#define wcscmp      SoftNdkWdkCrt_wcscmp
#define wcsncmp     SoftNdkWdkCrt_wcsncmp
#define _wcsicmp    SoftNdkWdkCrt__wcsicmp
#define _wcsnicmp   SoftNdkWdkCrt__wcsnicmp
#define wcschr      SoftNdkWdkCrt_wcschr
#define wcsrchr     SoftNdkWdkCrt_wcsrchr
#define wcsstr      SoftNdkWdkCrt_wcsstr
#define wcstol      SoftNdkWdkCrt_wcstol
#define wcstoul     SoftNdkWdkCrt_wcstoul
#define wcstombs    SoftNdkWdkCrt_wcstombs
#define mbstowcs    SoftNdkWdkCrt_mbstowcs
#define mbtowc      SoftNdkWdkCrt_mbtowc
#define wctomb      SoftNdkWdkCrt_wctomb
#define towlower    SoftNdkWdkCrt_towlower
#define towupper    SoftNdkWdkCrt_towupper
#define _vsnprintf  SoftNdkWdkCrt__vsnprintf
#define _snprintf   SoftNdkWdkCrt__snprintf
#define _vsnwprintf SoftNdkWdkCrt__vsnwprintf
#define _snwprintf  SoftNdkWdkCrt__snwprintf
#define swprintf    SoftNdkWdkCrt_swprintf
#define vswprintf   SoftNdkWdkCrt_vswprintf
#endif
typedef PVOID HANDLE, *PHANDLE, *PPVOID;
typedef const void *PCVOID;
typedef NTSTATUS *PNTSTATUS;
typedef LARGE_INTEGER *PLARGE_INTEGER;
typedef PHYSICAL_ADDRESS *PPHYSICAL_ADDRESS;
typedef GUID *PGUID, *LPGUID;
typedef const GUID *LPCGUID;
typedef KAFFINITY *PKAFFINITY;
typedef GROUP_AFFINITY *PGROUP_AFFINITY;
typedef ULONG ACCESS_MASK, *PACCESS_MASK;
typedef ULONG DEVICE_TYPE;
typedef LONG KPRIORITY;
typedef CCHAR KPROCESSOR_MODE;
typedef UCHAR KIRQL, *PKIRQL;
typedef ULONG64 POOL_FLAGS;
typedef ULONG_PTR PFN_NUMBER, *PPFN_NUMBER;

typedef union _ULARGE_INTEGER {
    SOFTNDK_ANON_STRUCT {
        ULONG LowPart;
        ULONG HighPart;
    };
    struct {
        ULONG LowPart;
        ULONG HighPart;
    } u;
    ULONGLONG QuadPart;
} ULARGE_INTEGER, *PULARGE_INTEGER;

typedef struct _PROCESSOR_NUMBER {
    USHORT Group;
    UCHAR Number;
    UCHAR Reserved;
} PROCESSOR_NUMBER, *PPROCESSOR_NUMBER;

typedef enum _MODE { KernelMode, UserMode, MaximumMode } MODE;

typedef enum _KWAIT_REASON {
    Executive,
    FreePage,
    PageIn,
    PoolAllocation,
    DelayExecution,
    Suspended,
    UserRequest,
    WrExecutive,
    WrFreePage,
    WrPageIn,
    WrPoolAllocation,
    WrDelayExecution,
    WrSuspended,
    WrUserRequest,
    MaximumWaitReason = 40
} KWAIT_REASON;

/* ------------------------------------------------------------------------------------------ */
/* Limits, sizes, and the small macros of ntdef.h. */
#define MINCHAR 0x80
#define MAXCHAR 0x7f
#define MINSHORT 0x8000
#define MAXSHORT 0x7fff
#define MINLONG ((LONG)0x80000000)
#define MAXLONG 0x7fffffff
#define MAXUCHAR 0xff
#define MAXUSHORT 0xffff
#define MAXULONG64 ((ULONG64)~((ULONG64)0))
#define MAXLONGLONG ((LONGLONG)0x7fffffffffffffffLL)
#define MAXULONG_PTR (~((ULONG_PTR)0))
#define MAXLONG_PTR ((LONG_PTR)(MAXULONG_PTR >> 1))
#define MAXSIZE_T ((SIZE_T)~((SIZE_T)0))
#define MAXSSIZE_T ((SSIZE_T)(MAXSIZE_T >> 1))
#define ANYSIZE_ARRAY 1

#define UNREFERENCED_PARAMETER(P) ((void)(P))
/* MSVC's __pragma(...) is C99's _Pragma("..."): usable inside a macro. A pragma gcc or clang
 * does not know (warning(...), prefast(...)) is -Wunknown-pragmas' business, as #pragma is. */
#ifndef __pragma
#define __pragma(x) _Pragma(#x)
#endif
#define ARGUMENT_PRESENT(ArgumentPointer)  ((CHAR *)((ULONG_PTR)(ArgumentPointer)) != (CHAR *)NULL)
#define DBG_UNREFERENCED_PARAMETER(P) ((void)(P))
#define DBG_UNREFERENCED_LOCAL_VARIABLE(V) ((void)(V))
#ifdef __cplusplus
#define C_ASSERT(e) static_assert(e, #e)
#else
#define C_ASSERT(e) _Static_assert(e, #e)
#endif
#define FIELD_OFFSET(type, field) ((LONG)offsetof(type, field))
#define UFIELD_OFFSET(type, field) ((ULONG)offsetof(type, field))
#define RTL_FIELD_SIZE(type, field) (sizeof(((type *)0)->field))
#define RTL_SIZEOF_THROUGH_FIELD(type, field) (offsetof(type, field) + RTL_FIELD_SIZE(type, field))
#define RTL_NUMBER_OF(a) (sizeof(a) / sizeof((a)[0]))
#define RTL_NUMBER_OF_V1(a) RTL_NUMBER_OF(a)
#define RTL_NUMBER_OF_V2(a) RTL_NUMBER_OF(a)
#ifndef ARRAYSIZE
#define ARRAYSIZE(a) RTL_NUMBER_OF(a)
#endif
#define RTL_BITS_OF(t) (sizeof(t) * 8)
/* offsetof rather than the classic &((type *)0)->field, which UBSan reports; through void *
 * so that clang's -Wcast-align does not flag every use. */
#define CONTAINING_RECORD(address, type, field)                                                    \
    ((type *)(void *)((PCHAR)(address) - offsetof(type, field)))
#ifndef min
#define min(a, b) (((a) < (b)) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) (((a) > (b)) ? (a) : (b))
#endif
#define FlagOn(_F, _SF) ((_F) & (_SF))
#define BooleanFlagOn(F, SF) ((BOOLEAN)(((F) & (SF)) != 0))
#define SetFlag(_F, _SF) ((_F) |= (_SF))
#define ClearFlag(_F, _SF) ((_F) &= ~(_SF))
#define ALIGN_DOWN_BY(length, alignment) ((ULONG_PTR)(length) & ~((ULONG_PTR)(alignment) - 1))
#define ALIGN_UP_BY(length, alignment) (ALIGN_DOWN_BY(((ULONG_PTR)(length) + (alignment) - 1), alignment))
#define ALIGN_DOWN_POINTER_BY(address, alignment) ((PVOID)ALIGN_DOWN_BY(address, alignment))
#define ALIGN_UP_POINTER_BY(address, alignment) ((PVOID)ALIGN_UP_BY(address, alignment))
#define ALIGN_DOWN(length, type) ALIGN_DOWN_BY(length, sizeof(type))
#define ALIGN_UP(length, type) ALIGN_UP_BY(length, sizeof(type))

#define NT_INFORMATION(Status) ((((ULONG)(Status)) >> 30) == 1)
#define NT_WARNING(Status) ((((ULONG)(Status)) >> 30) == 2)
#define NT_ERROR(Status) ((((ULONG)(Status)) >> 30) == 3)

/* Pages: 4 KiB, as NDK_ADAPTER_PAGE_SIZE (PAGE_SIZE comes from ndkpi.h). */
#define PAGE_SHIFT 12L
#define PAGE_ALIGN(Va) ((PVOID)((ULONG_PTR)(Va) & ~((ULONG_PTR)PAGE_SIZE - 1)))
#define BYTE_OFFSET(Va) ((ULONG)((LONG_PTR)(Va) & (PAGE_SIZE - 1)))
#define ROUND_TO_PAGES(Size) (((ULONG_PTR)(Size) + PAGE_SIZE - 1) & ~((ULONG_PTR)PAGE_SIZE - 1))
#define BYTES_TO_PAGES(Size) (((Size) >> PAGE_SHIFT) + (((Size) & (PAGE_SIZE - 1)) != 0))
#define ADDRESS_AND_SIZE_TO_SPAN_PAGES(Va, Size)                                                   \
    ((BYTE_OFFSET(Va) + ((SIZE_T)(Size)) + (PAGE_SIZE - 1)) >> PAGE_SHIFT)

/* More NTSTATUS values drivers use beyond the NDK set in ndkpi.h. */
#define STATUS_WAIT_0 SOFTNDK_NTSTATUS(0x00000000L)
#define STATUS_ABANDONED SOFTNDK_NTSTATUS(0x00000080L)
#define STATUS_USER_APC SOFTNDK_NTSTATUS(0x000000C0L)
#define STATUS_ALERTED SOFTNDK_NTSTATUS(0x00000101L)
#define STATUS_REPARSE SOFTNDK_NTSTATUS(0x00000104L)
#define STATUS_MORE_ENTRIES SOFTNDK_NTSTATUS(0x00000105L)
#define STATUS_DEVICE_BUSY SOFTNDK_NTSTATUS(0x80000011L)
#define STATUS_INFO_LENGTH_MISMATCH SOFTNDK_NTSTATUS(0xC0000004L)
#define STATUS_NO_SUCH_DEVICE SOFTNDK_NTSTATUS(0xC000000EL)
#define STATUS_MORE_PROCESSING_REQUIRED SOFTNDK_NTSTATUS(0xC0000016L)
#define STATUS_ACCESS_DENIED SOFTNDK_NTSTATUS(0xC0000022L)
#define STATUS_OBJECT_NAME_INVALID SOFTNDK_NTSTATUS(0xC0000033L)
#define STATUS_OBJECT_NAME_NOT_FOUND SOFTNDK_NTSTATUS(0xC0000034L)
#define STATUS_OBJECT_NAME_COLLISION SOFTNDK_NTSTATUS(0xC0000035L)
#define STATUS_DATA_ERROR SOFTNDK_NTSTATUS(0xC000003EL)
#define STATUS_DELETE_PENDING SOFTNDK_NTSTATUS(0xC0000056L)
#define STATUS_INTEGER_OVERFLOW SOFTNDK_NTSTATUS(0xC0000095L)
#define STATUS_RETRY SOFTNDK_NTSTATUS(0xC000022DL)
#define STATUS_NOINTERFACE SOFTNDK_NTSTATUS(0xC00002B9L)
#define STATUS_INVALID_PARAMETER_1 SOFTNDK_NTSTATUS(0xC00000EFL)
#define STATUS_INVALID_PARAMETER_2 SOFTNDK_NTSTATUS(0xC00000F0L)
#define STATUS_INVALID_PARAMETER_3 SOFTNDK_NTSTATUS(0xC00000F1L)
#define STATUS_INVALID_PARAMETER_4 SOFTNDK_NTSTATUS(0xC00000F2L)
#define STATUS_FAILED_DRIVER_ENTRY SOFTNDK_NTSTATUS(0xC0000365L)

/* ------------------------------------------------------------------------------------------ */
/* Bugchecks and assertions. A bugcheck prints the stop code, its parameters and a backtrace
 * to stderr and aborts the process: the test fails where Windows would have crashed. */
#define IRQL_NOT_GREATER_OR_EQUAL 0x00000009
#define IRQL_NOT_LESS_OR_EQUAL 0x0000000A
#define SPIN_LOCK_ALREADY_OWNED 0x0000000F
#define SPIN_LOCK_NOT_OWNED 0x00000010
#define BAD_POOL_HEADER 0x00000019
#define NO_MORE_IRP_STACK_LOCATIONS 0x00000035
#define MULTIPLE_IRP_COMPLETE_REQUESTS 0x00000044
#define INVALID_WORK_QUEUE_ITEM 0x00000096
#define BAD_POOL_CALLER 0x000000C2
#define SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION               0x000000C1
#define DRIVER_VERIFIER_DETECTED_VIOLATION 0x000000C4
#define DRIVER_UNLOADED_WITHOUT_CANCELLING_PENDING_OPERATIONS 0x000000CE
#define DRIVER_IRQL_NOT_LESS_OR_EQUAL 0x000000D1
#define MANUALLY_INITIATED_CRASH 0x000000E2
#define KERNEL_SECURITY_CHECK_FAILURE 0x00000139
#define WORKER_THREAD_RETURNED_AT_BAD_IRQL 0x000000E1
#define DRIVER_LEFT_LOCKED_PAGES_IN_PROCESS 0x000000CB

SOFTNDK_WDK_API SOFTNDK_WDK_NORETURN VOID KeBugCheckEx(ULONG BugCheckCode, ULONG_PTR P1,
                                                        ULONG_PTR P2, ULONG_PTR P3, ULONG_PTR P4);
SOFTNDK_WDK_API SOFTNDK_WDK_NORETURN VOID KeBugCheck(ULONG BugCheckCode);

/* Called by the assertion macros; bugchecks (Windows: an assertion without a debugger). */
SOFTNDK_WDK_API SOFTNDK_WDK_NORETURN VOID SoftNdkWdkAssertFailed(PCSTR Expression, PCSTR Message,
                                                                  PCSTR File, ULONG Line);

/* The assertions are expressions (TRUE when they hold, as the WDK's), and also statements that
 * draw no -Wunused-value (NT_ASSERT(FALSE); is common): the test is a call, whose unused result
 * compilers accept. */
static inline BOOLEAN SoftNdkWdkAssertCheck(int Holds, PCSTR Expression, PCSTR Message, PCSTR File,
                                            ULONG Line)
{
    if (!Holds)
        SoftNdkWdkAssertFailed(Expression, Message, File, Line);
    return TRUE;
}
/* A free build's NT_VERIFY: the expression's truth, as a call (no -Wunused-value). */
static inline BOOLEAN SoftNdkWdkVerifyValue(int Holds)
{
    return Holds ? TRUE : FALSE;
}
#define NT_FRE_ASSERT(exp) SoftNdkWdkAssertCheck((exp) ? 1 : 0, #exp, NULL, __FILE__, __LINE__)
#define NT_FRE_ASSERTMSG(msg, exp)                                                                 \
    SoftNdkWdkAssertCheck((exp) ? 1 : 0, #exp, (msg), __FILE__, __LINE__)
#if DBG
#define NT_ASSERT(exp) NT_FRE_ASSERT(exp)
#define NT_ASSERTMSG(msg, exp) NT_FRE_ASSERTMSG(msg, exp)
#define NT_ASSERT_ASSUME(exp) NT_FRE_ASSERT(exp)
#define NT_VERIFY(exp) NT_FRE_ASSERT(exp)
#define NT_VERIFYMSG(msg, exp) NT_FRE_ASSERTMSG(msg, exp)
#define ASSERT(exp) ((VOID)NT_FRE_ASSERT(exp))
#define ASSERTMSG(msg, exp) ((VOID)NT_FRE_ASSERTMSG(msg, exp))
#else
#define NT_ASSERT(exp) ((VOID)0)
#define NT_ASSERTMSG(msg, exp) ((VOID)0)
#define NT_ASSERT_ASSUME(exp) ((VOID)0)
#define NT_VERIFY(exp) SoftNdkWdkVerifyValue((exp) ? 1 : 0)
#define NT_VERIFYMSG(msg, exp) SoftNdkWdkVerifyValue((exp) ? 1 : 0)
#define ASSERT(exp) ((VOID)0)
#define ASSERTMSG(msg, exp) ((VOID)0)
#endif

/* Structured exception handling does not exist here: __try / __except compile (so that the
 * usual guard around MmProbeAndLockPages builds unchanged) but never catch anything: the
 * __except block is dead code and a fault crashes the process. __finally and __leave are not
 * provided (they would silently change control flow): such code does not compile. */
#ifndef SOFTNDK_WDK_NO_SEH
#define __try if (1)
#define __except(filter) else if (0)
#define GetExceptionCode() ((NTSTATUS)STATUS_UNSUCCESSFUL)
#define EXCEPTION_EXECUTE_HANDLER 1
#define EXCEPTION_CONTINUE_SEARCH 0
#define EXCEPTION_CONTINUE_EXECUTION (-1)
#endif

/* ------------------------------------------------------------------------------------------ */
/* Debug output: to stderr. DbgPrint understands the Windows conversions %wZ (PUNICODE_STRING),
 * %ws / %S (WCHAR string), %Z (PANSI_STRING), %I64x / %I64d / %Ix and the C ones. It is not
 * format-checked by the compiler (neither is it by MSVC). DbgPrintEx prints levels up to
 * SOFTNDK_WDK_DEBUG_LEVEL (environment; default 3 = everything up to DPFLTR_INFO_LEVEL). */
#define DPFLTR_ERROR_LEVEL 0
#define DPFLTR_WARNING_LEVEL 1
#define DPFLTR_TRACE_LEVEL 2
#define DPFLTR_INFO_LEVEL 3
#define DPFLTR_MASK 0x80000000
/* Component ids: accepted and printed; their values are not Windows'. */
#define DPFLTR_DEFAULT_ID 101
#define DPFLTR_IHVDRIVER_ID 77
#define DPFLTR_IHVNETWORK_ID 78
#define DPFLTR_IHVBUS_ID 79

SOFTNDK_WDK_API ULONG DbgPrint(PCSTR Format, ...);
SOFTNDK_WDK_API ULONG DbgPrintEx(ULONG ComponentId, ULONG Level, PCSTR Format, ...);
SOFTNDK_WDK_API ULONG vDbgPrintEx(ULONG ComponentId, ULONG Level, PCSTR Format, va_list ap);
SOFTNDK_WDK_API VOID DbgBreakPoint(VOID);
#define DbgBreakPointWithStatus(s) DbgBreakPoint()
#if DBG
#define KdPrint(_x_) DbgPrint _x_
#define KdPrintEx(_x_) DbgPrintEx _x_
#define KdBreakPoint() DbgBreakPoint()
#else
#define KdPrint(_x_)
#define KdPrintEx(_x_)
#define KdBreakPoint()
#endif

/* ------------------------------------------------------------------------------------------ */
/* IRQL */
#define PASSIVE_LEVEL 0
#define LOW_LEVEL 0
#define APC_LEVEL 1
#define DISPATCH_LEVEL 2
#define CMCI_LEVEL 5
#define CLOCK_LEVEL 13
#define IPI_LEVEL 14
#define POWER_LEVEL 14
#define PROFILE_LEVEL 15
#define HIGH_LEVEL 15

SOFTNDK_WDK_API KIRQL KeGetCurrentIrql(VOID);
SOFTNDK_WDK_API KIRQL KfRaiseIrql(KIRQL NewIrql);
SOFTNDK_WDK_API VOID KeLowerIrql(KIRQL NewIrql);
SOFTNDK_WDK_API KIRQL KeRaiseIrqlToDpcLevel(VOID);
#define KeRaiseIrql(a, b) (*(b) = KfRaiseIrql(a))
/* Bugchecks unless IRQL <= APC_LEVEL (what PAGED_CODE asserts on a checked Windows build). */
SOFTNDK_WDK_API VOID SoftNdkWdkPagedCode(PCSTR File, ULONG Line);
#define PAGED_CODE() SoftNdkWdkPagedCode(__FILE__, __LINE__)
#define PAGED_CODE_LOCKED() ((VOID)0)
#define KeEnterCriticalRegion() ((VOID)0)
#define KeLeaveCriticalRegion() ((VOID)0)
#define KeEnterGuardedRegion() ((VOID)0)
#define KeLeaveGuardedRegion() ((VOID)0)
#define KeAreApcsDisabled() FALSE

/* ------------------------------------------------------------------------------------------ */
/* Spin locks: a real spin lock on the KSPIN_LOCK word (spins, then yields the CPU so that a
 * preempted holder can run). Acquire raises to DISPATCH_LEVEL. Re-acquiring a lock the thread
 * holds, or releasing one it does not, bugchecks (SPIN_LOCK_ALREADY_OWNED / _NOT_OWNED). */
typedef ULONG_PTR KSPIN_LOCK, *PKSPIN_LOCK;

typedef struct _KSPIN_LOCK_QUEUE {
    struct _KSPIN_LOCK_QUEUE *volatile Next;
    PKSPIN_LOCK volatile Lock;
} KSPIN_LOCK_QUEUE, *PKSPIN_LOCK_QUEUE;

typedef struct _KLOCK_QUEUE_HANDLE {
    KSPIN_LOCK_QUEUE LockQueue;
    KIRQL OldIrql;
} KLOCK_QUEUE_HANDLE, *PKLOCK_QUEUE_HANDLE;

FORCEINLINE VOID KeInitializeSpinLock(PKSPIN_LOCK SpinLock)
{
    *SpinLock = 0;
}
SOFTNDK_WDK_API KIRQL KeAcquireSpinLockRaiseToDpc(PKSPIN_LOCK SpinLock);
#define KeAcquireSpinLock(SpinLock, OldIrql) (*(OldIrql) = KeAcquireSpinLockRaiseToDpc(SpinLock))
SOFTNDK_WDK_API VOID KeReleaseSpinLock(PKSPIN_LOCK SpinLock, KIRQL NewIrql);
SOFTNDK_WDK_API VOID KeAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock);
SOFTNDK_WDK_API VOID KeReleaseSpinLockFromDpcLevel(PKSPIN_LOCK SpinLock);
SOFTNDK_WDK_API BOOLEAN KeTryToAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock);
SOFTNDK_WDK_API BOOLEAN KeTestSpinLock(PKSPIN_LOCK SpinLock);
SOFTNDK_WDK_API VOID KeAcquireInStackQueuedSpinLock(PKSPIN_LOCK SpinLock,
                                                    PKLOCK_QUEUE_HANDLE LockHandle);
SOFTNDK_WDK_API VOID KeReleaseInStackQueuedSpinLock(PKLOCK_QUEUE_HANDLE LockHandle);
SOFTNDK_WDK_API VOID KeAcquireInStackQueuedSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock,
                                                              PKLOCK_QUEUE_HANDLE LockHandle);
SOFTNDK_WDK_API VOID KeReleaseInStackQueuedSpinLockFromDpcLevel(PKLOCK_QUEUE_HANDLE LockHandle);

/* ------------------------------------------------------------------------------------------ */
/* Dispatcher objects: events and semaphores, waited on with KeWaitForSingleObject. */
typedef struct _DISPATCHER_HEADER {
    UCHAR Type; /* EVENT_TYPE, or SOFTNDK_WDK_SEMAPHORE_OBJECT */
    UCHAR Reserved[3];
    volatile LONG SignalState;
    ULONG_PTR Reserved2;
} DISPATCHER_HEADER;

typedef enum _EVENT_TYPE { NotificationEvent, SynchronizationEvent } EVENT_TYPE;
#define SOFTNDK_WDK_SEMAPHORE_OBJECT 5

typedef struct _KEVENT {
    DISPATCHER_HEADER Header;
} KEVENT, *PKEVENT, *PRKEVENT;

typedef struct _KSEMAPHORE {
    DISPATCHER_HEADER Header;
    LONG Limit;
} KSEMAPHORE, *PKSEMAPHORE, *PRKSEMAPHORE;

#define IO_NO_INCREMENT 0
#define EVENT_INCREMENT 1
#define IO_NETWORK_INCREMENT 2
#define SEMAPHORE_INCREMENT 1

SOFTNDK_WDK_API VOID KeInitializeEvent(PRKEVENT Event, EVENT_TYPE Type, BOOLEAN State);
SOFTNDK_WDK_API LONG KeSetEvent(PRKEVENT Event, KPRIORITY Increment, BOOLEAN Wait);
SOFTNDK_WDK_API VOID KeClearEvent(PRKEVENT Event);
SOFTNDK_WDK_API LONG KeResetEvent(PRKEVENT Event);
SOFTNDK_WDK_API LONG KeReadStateEvent(PRKEVENT Event);
SOFTNDK_WDK_API VOID KeInitializeSemaphore(PRKSEMAPHORE Semaphore, LONG Count, LONG Limit);
SOFTNDK_WDK_API LONG KeReleaseSemaphore(PRKSEMAPHORE Semaphore, KPRIORITY Increment,
                                        LONG Adjustment, BOOLEAN Wait);
SOFTNDK_WDK_API LONG KeReadStateSemaphore(PRKSEMAPHORE Semaphore);

/* Timeout: NULL = forever; negative = relative, in 100 ns units; positive or zero = absolute
 * system time (100 ns units since 1601-01-01 UTC). Returns STATUS_SUCCESS (= STATUS_WAIT_0)
 * or STATUS_TIMEOUT. A wait that can block (Timeout NULL or non-zero) at DISPATCH_LEVEL or
 * above bugchecks. WaitReason, WaitMode and Alertable are accepted and ignored. */
SOFTNDK_WDK_API NTSTATUS KeWaitForSingleObject(PVOID Object, KWAIT_REASON WaitReason,
                                               KPROCESSOR_MODE WaitMode, BOOLEAN Alertable,
                                               PLARGE_INTEGER Timeout);
SOFTNDK_WDK_API NTSTATUS KeDelayExecutionThread(KPROCESSOR_MODE WaitMode, BOOLEAN Alertable,
                                                PLARGE_INTEGER Interval);
SOFTNDK_WDK_API VOID KeStallExecutionProcessor(ULONG MicroSeconds);

/* Fast mutexes and guarded mutexes (raise to APC_LEVEL while held). */
typedef struct _FAST_MUTEX {
    volatile LONG Count;
    PVOID Owner;
    ULONG Contention;
    KEVENT Event;
    ULONG OldIrql;
} FAST_MUTEX, *PFAST_MUTEX, KGUARDED_MUTEX, *PKGUARDED_MUTEX;
SOFTNDK_WDK_API VOID ExInitializeFastMutex(PFAST_MUTEX FastMutex);
SOFTNDK_WDK_API VOID ExAcquireFastMutex(PFAST_MUTEX FastMutex);
SOFTNDK_WDK_API VOID ExReleaseFastMutex(PFAST_MUTEX FastMutex);
SOFTNDK_WDK_API BOOLEAN ExTryToAcquireFastMutex(PFAST_MUTEX FastMutex);
#define ExAcquireFastMutexUnsafe(m) ExAcquireFastMutex(m)
#define ExReleaseFastMutexUnsafe(m) ExReleaseFastMutex(m)
#define KeInitializeGuardedMutex(m) ExInitializeFastMutex(m)
#define KeAcquireGuardedMutex(m) ExAcquireFastMutex(m)
#define KeReleaseGuardedMutex(m) ExReleaseFastMutex(m)
#define KeTryToAcquireGuardedMutex(m) ExTryToAcquireFastMutex(m)

/* ------------------------------------------------------------------------------------------ */
/* Time and processors */
SOFTNDK_WDK_API VOID KeQuerySystemTimePrecise(PLARGE_INTEGER CurrentTime);
#define KeQuerySystemTime(t) KeQuerySystemTimePrecise(t)
SOFTNDK_WDK_API ULONGLONG KeQueryInterruptTime(VOID);
#define KeQueryInterruptTimePrecise(qpc) KeQueryInterruptTime()
SOFTNDK_WDK_API LARGE_INTEGER KeQueryPerformanceCounter(PLARGE_INTEGER PerformanceFrequency);
SOFTNDK_WDK_API ULONG KeQueryTimeIncrement(VOID);
/* Clock ticks since boot: interrupt time in units of the time increment. */
#define KeQueryTickCount(CurrentCount)                                                             \
    ((CurrentCount)->QuadPart = (LONGLONG)(KeQueryInterruptTime() / KeQueryTimeIncrement()))
#define ALL_PROCESSOR_GROUPS 0xffff
SOFTNDK_WDK_API ULONG KeQueryActiveProcessorCountEx(USHORT GroupNumber);
SOFTNDK_WDK_API ULONG KeQueryActiveProcessorCount(PKAFFINITY ActiveProcessors);
SOFTNDK_WDK_API USHORT KeQueryActiveGroupCount(VOID);
SOFTNDK_WDK_API ULONG KeGetCurrentProcessorNumberEx(PPROCESSOR_NUMBER ProcNumber);
#define KeGetCurrentProcessorNumber() KeGetCurrentProcessorNumberEx(NULL)
SOFTNDK_WDK_API HANDLE PsGetCurrentThreadId(VOID);
SOFTNDK_WDK_API HANDLE PsGetCurrentProcessId(VOID);

/* ------------------------------------------------------------------------------------------ */
/* Interlocked operations: atomic read-modify-writes with a full barrier, as on x64
 * (lock-prefixed instructions), in every width Windows has them, returning what Windows'
 * routines return: the new value for Increment / Decrement / Add, the old one for the rest.
 * The body is the same builtin in every width and C has no generic function to name once per
 * width, so one macro per signature stamps out the named routines. */
#define SOFTNDK_WDK_SEQ __ATOMIC_SEQ_CST
#define SOFTNDK_WDK_INTERLOCKED_STEP(name, T, builtin)                                             \
    FORCEINLINE T name(T volatile *Addend)                                                         \
    {                                                                                              \
        return builtin(Addend, 1, SOFTNDK_WDK_SEQ);                                                \
    }
#define SOFTNDK_WDK_INTERLOCKED_OP(name, T, builtin)                                               \
    FORCEINLINE T name(T volatile *Destination, T Value)                                           \
    {                                                                                              \
        return builtin(Destination, Value, SOFTNDK_WDK_SEQ);                                       \
    }
/* Returns the initial value either way: the builtin writes it to Comperand on a mismatch. */
#define SOFTNDK_WDK_INTERLOCKED_CAS(name, T)                                                       \
    FORCEINLINE T name(T volatile *Destination, T ExChange, T Comperand)                           \
    {                                                                                              \
        __atomic_compare_exchange_n(Destination, &Comperand, ExChange, 0, SOFTNDK_WDK_SEQ,         \
                                    SOFTNDK_WDK_SEQ);                                              \
        return Comperand;                                                                          \
    }
SOFTNDK_WDK_INTERLOCKED_STEP(InterlockedIncrement, LONG, __atomic_add_fetch)
SOFTNDK_WDK_INTERLOCKED_STEP(InterlockedDecrement, LONG, __atomic_sub_fetch)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedExchange, LONG, __atomic_exchange_n)
SOFTNDK_WDK_INTERLOCKED_CAS(InterlockedCompareExchange, LONG)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedExchangeAdd, LONG, __atomic_fetch_add)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedAdd, LONG, __atomic_add_fetch)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedOr, LONG, __atomic_fetch_or)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedAnd, LONG, __atomic_fetch_and)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedXor, LONG, __atomic_fetch_xor)
SOFTNDK_WDK_INTERLOCKED_STEP(InterlockedIncrement16, SHORT, __atomic_add_fetch)
SOFTNDK_WDK_INTERLOCKED_STEP(InterlockedDecrement16, SHORT, __atomic_sub_fetch)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedExchange16, SHORT, __atomic_exchange_n)
SOFTNDK_WDK_INTERLOCKED_CAS(InterlockedCompareExchange16, SHORT)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedExchangeAdd16, SHORT, __atomic_fetch_add)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedAnd16, SHORT, __atomic_fetch_and)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedOr16, SHORT, __atomic_fetch_or)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedXor16, SHORT, __atomic_fetch_xor)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedExchange8, CHAR, __atomic_exchange_n)
SOFTNDK_WDK_INTERLOCKED_CAS(InterlockedCompareExchange8, CHAR)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedExchangeAdd8, CHAR, __atomic_fetch_add)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedAnd8, CHAR, __atomic_fetch_and)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedOr8, CHAR, __atomic_fetch_or)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedXor8, CHAR, __atomic_fetch_xor)
SOFTNDK_WDK_INTERLOCKED_STEP(InterlockedIncrement64, LONG64, __atomic_add_fetch)
SOFTNDK_WDK_INTERLOCKED_STEP(InterlockedDecrement64, LONG64, __atomic_sub_fetch)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedExchange64, LONG64, __atomic_exchange_n)
SOFTNDK_WDK_INTERLOCKED_CAS(InterlockedCompareExchange64, LONG64)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedExchangeAdd64, LONG64, __atomic_fetch_add)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedAdd64, LONG64, __atomic_add_fetch)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedAnd64, LONG64, __atomic_fetch_and)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedOr64, LONG64, __atomic_fetch_or)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedXor64, LONG64, __atomic_fetch_xor)
SOFTNDK_WDK_INTERLOCKED_OP(InterlockedExchangePointer, PVOID, __atomic_exchange_n)
SOFTNDK_WDK_INTERLOCKED_CAS(InterlockedCompareExchangePointer, PVOID)
#undef SOFTNDK_WDK_INTERLOCKED_STEP
#undef SOFTNDK_WDK_INTERLOCKED_OP
#undef SOFTNDK_WDK_INTERLOCKED_CAS
FORCEINLINE LONG ReadAcquire(LONG const volatile *Source)
{
    return __atomic_load_n(Source, __ATOMIC_ACQUIRE);
}
FORCEINLINE LONG ReadNoFence(LONG const volatile *Source)
{
    return __atomic_load_n(Source, __ATOMIC_RELAXED);
}
FORCEINLINE VOID WriteRelease(LONG volatile *Destination, LONG Value)
{
    __atomic_store_n(Destination, Value, __ATOMIC_RELEASE);
}
FORCEINLINE VOID WriteNoFence(LONG volatile *Destination, LONG Value)
{
    __atomic_store_n(Destination, Value, __ATOMIC_RELAXED);
}
FORCEINLINE PVOID ReadPointerAcquire(PVOID const volatile *Source)
{
    return __atomic_load_n(Source, __ATOMIC_ACQUIRE);
}
FORCEINLINE VOID WritePointerRelease(PVOID volatile *Destination, PVOID Value)
{
    __atomic_store_n(Destination, Value, __ATOMIC_RELEASE);
}
/* The ordering variants are the full-barrier operations (stronger than asked, never weaker). */
#define InterlockedIncrementNoFence       InterlockedIncrement
#define InterlockedIncrementAcquire       InterlockedIncrement
#define InterlockedIncrementRelease       InterlockedIncrement
#define InterlockedDecrementNoFence       InterlockedDecrement
#define InterlockedDecrementAcquire       InterlockedDecrement
#define InterlockedDecrementRelease       InterlockedDecrement
#define InterlockedCompareExchangeAcquire InterlockedCompareExchange
#define InterlockedCompareExchangeRelease InterlockedCompareExchange
#define InterlockedCompareExchangeNoFence InterlockedCompareExchange
#define InterlockedExchangeAddNoFence     InterlockedExchangeAdd
#define UInt32x32To64(a, b)               ((ULONGLONG)(ULONG)(a) * (ULONGLONG)(ULONG)(b))
#define Int32x32To64(a, b)                ((LONGLONG)(LONG)(a) * (LONGLONG)(LONG)(b))
#define MemoryBarrier() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define KeMemoryBarrier() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define KeMemoryBarrierWithoutFence() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#define _ReadWriteBarrier() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#if defined(__x86_64__) || defined(__i386__)
#define YieldProcessor() __builtin_ia32_pause()
#else
#define YieldProcessor() ((VOID)0)
#endif

/* ------------------------------------------------------------------------------------------ */
/* Doubly and singly linked lists. The unlinking functions check the neighbours' links and
 * bugcheck KERNEL_SECURITY_CHECK_FAILURE (parameter 3) on corruption, as Windows does. */
typedef struct _LIST_ENTRY {
    struct _LIST_ENTRY *Flink;
    struct _LIST_ENTRY *Blink;
} LIST_ENTRY, *PLIST_ENTRY, *PRLIST_ENTRY;

typedef struct _SINGLE_LIST_ENTRY {
    struct _SINGLE_LIST_ENTRY *Next;
} SINGLE_LIST_ENTRY, *PSINGLE_LIST_ENTRY;

#define FAST_FAIL_CORRUPT_LIST_ENTRY 3
FORCEINLINE VOID SoftNdkWdkCheckListEntry(PLIST_ENTRY Entry)
{
    if (Entry->Flink->Blink != Entry || Entry->Blink->Flink != Entry)
        KeBugCheckEx(KERNEL_SECURITY_CHECK_FAILURE, FAST_FAIL_CORRUPT_LIST_ENTRY,
                     (ULONG_PTR)Entry, 0, 0);
}

FORCEINLINE VOID InitializeListHead(PLIST_ENTRY ListHead)
{
    ListHead->Flink = ListHead->Blink = ListHead;
}
FORCEINLINE BOOLEAN IsListEmpty(const LIST_ENTRY *ListHead)
{
    return (BOOLEAN)(ListHead->Flink == ListHead);
}
/* TRUE when the list is empty afterwards. */
FORCEINLINE BOOLEAN RemoveEntryList(PLIST_ENTRY Entry)
{
    SoftNdkWdkCheckListEntry(Entry);
    PLIST_ENTRY Flink = Entry->Flink, Blink = Entry->Blink;
    Blink->Flink = Flink;
    Flink->Blink = Blink;
    return (BOOLEAN)(Flink == Blink);
}
FORCEINLINE PLIST_ENTRY RemoveHeadList(PLIST_ENTRY ListHead)
{
    PLIST_ENTRY Entry = ListHead->Flink;
    SoftNdkWdkCheckListEntry(ListHead);
    SoftNdkWdkCheckListEntry(Entry);
    ListHead->Flink = Entry->Flink;
    Entry->Flink->Blink = ListHead;
    return Entry;
}
FORCEINLINE PLIST_ENTRY RemoveTailList(PLIST_ENTRY ListHead)
{
    PLIST_ENTRY Entry = ListHead->Blink;
    SoftNdkWdkCheckListEntry(ListHead);
    SoftNdkWdkCheckListEntry(Entry);
    ListHead->Blink = Entry->Blink;
    Entry->Blink->Flink = ListHead;
    return Entry;
}
FORCEINLINE VOID InsertTailList(PLIST_ENTRY ListHead, PLIST_ENTRY Entry)
{
    PLIST_ENTRY Blink = ListHead->Blink;
    if (Blink->Flink != ListHead)
        KeBugCheckEx(KERNEL_SECURITY_CHECK_FAILURE, FAST_FAIL_CORRUPT_LIST_ENTRY,
                     (ULONG_PTR)ListHead, 0, 0);
    Entry->Flink = ListHead;
    Entry->Blink = Blink;
    Blink->Flink = Entry;
    ListHead->Blink = Entry;
}
FORCEINLINE VOID InsertHeadList(PLIST_ENTRY ListHead, PLIST_ENTRY Entry)
{
    PLIST_ENTRY Flink = ListHead->Flink;
    if (Flink->Blink != ListHead)
        KeBugCheckEx(KERNEL_SECURITY_CHECK_FAILURE, FAST_FAIL_CORRUPT_LIST_ENTRY,
                     (ULONG_PTR)ListHead, 0, 0);
    Entry->Flink = Flink;
    Entry->Blink = ListHead;
    Flink->Blink = Entry;
    ListHead->Flink = Entry;
}
/* Append the list that starts at ListToAppend (no separate head) to ListHead. */
FORCEINLINE VOID AppendTailList(PLIST_ENTRY ListHead, PLIST_ENTRY ListToAppend)
{
    PLIST_ENTRY ListEnd = ListHead->Blink;
    ListHead->Blink->Flink = ListToAppend;
    ListHead->Blink = ListToAppend->Blink;
    ListToAppend->Blink->Flink = ListHead;
    ListToAppend->Blink = ListEnd;
}
FORCEINLINE VOID PushEntryList(PSINGLE_LIST_ENTRY ListHead, PSINGLE_LIST_ENTRY Entry)
{
    Entry->Next = ListHead->Next;
    ListHead->Next = Entry;
}
FORCEINLINE PSINGLE_LIST_ENTRY PopEntryList(PSINGLE_LIST_ENTRY ListHead)
{
    PSINGLE_LIST_ENTRY First = ListHead->Next;
    if (First != NULL)
        ListHead->Next = First->Next;
    return First;
}
/* The same operations under a spin lock (callable at any IRQL <= DISPATCH_LEVEL). */
SOFTNDK_WDK_API PLIST_ENTRY ExInterlockedInsertHeadList(PLIST_ENTRY ListHead, PLIST_ENTRY Entry,
                                                        PKSPIN_LOCK Lock);
SOFTNDK_WDK_API PLIST_ENTRY ExInterlockedInsertTailList(PLIST_ENTRY ListHead, PLIST_ENTRY Entry,
                                                        PKSPIN_LOCK Lock);
SOFTNDK_WDK_API PLIST_ENTRY ExInterlockedRemoveHeadList(PLIST_ENTRY ListHead, PKSPIN_LOCK Lock);
SOFTNDK_WDK_API PSINGLE_LIST_ENTRY ExInterlockedPushEntryList(PSINGLE_LIST_ENTRY ListHead,
                                                              PSINGLE_LIST_ENTRY Entry,
                                                              PKSPIN_LOCK Lock);
SOFTNDK_WDK_API PSINGLE_LIST_ENTRY ExInterlockedPopEntryList(PSINGLE_LIST_ENTRY ListHead,
                                                             PKSPIN_LOCK Lock);

/* ------------------------------------------------------------------------------------------ */
/* Memory and byte order */
#define RtlEqualMemory(Destination, Source, Length) (!memcmp((Destination), (Source), (Length)))
#define RtlMoveMemory(Destination, Source, Length) memmove((Destination), (Source), (Length))
#define RtlCopyMemory(Destination, Source, Length) memcpy((Destination), (Source), (Length))
#define RtlCopyMemoryNonTemporal RtlCopyMemory
#define RtlFillMemory(Destination, Length, Fill) memset((Destination), (Fill), (Length))
#define RtlZeroMemory(Destination, Length) memset((Destination), 0, (Length))
FORCEINLINE PVOID RtlSecureZeroMemory(PVOID Ptr, SIZE_T Cnt)
{
    volatile char *p = (volatile char *)Ptr;
    while (Cnt--)
        *p++ = 0;
    return Ptr;
}
/* Number of leading bytes that match. */
FORCEINLINE SIZE_T RtlCompareMemory(const VOID *Source1, const VOID *Source2, SIZE_T Length)
{
    const UCHAR *a = (const UCHAR *)Source1, *b = (const UCHAR *)Source2;
    SIZE_T i = 0;
    while (i < Length && a[i] == b[i])
        i++;
    return i;
}
#define RtlUshortByteSwap(x) __builtin_bswap16((USHORT)(x))
#define RtlUlongByteSwap(x) __builtin_bswap32((ULONG)(x))
#define RtlUlonglongByteSwap(x) __builtin_bswap64((ULONGLONG)(x))

/* ------------------------------------------------------------------------------------------ */
/* Counted strings. Lengths are in bytes, without the terminator. */
typedef struct _UNICODE_STRING {
    USHORT Length;
    USHORT MaximumLength;
    PWCH Buffer;
} UNICODE_STRING, *PUNICODE_STRING;
typedef const UNICODE_STRING *PCUNICODE_STRING;

typedef struct _STRING {
    USHORT Length;
    USHORT MaximumLength;
    PCHAR Buffer;
} STRING, ANSI_STRING, OEM_STRING, *PSTRING, *PANSI_STRING, *POEM_STRING;
typedef const STRING *PCSTRING, *PCANSI_STRING;

#define RTL_CONSTANT_STRING(s)                                                                     \
    { (USHORT)(sizeof(s) - sizeof((s)[0])), (USHORT)sizeof(s), (PWCH)(s) }
#define DECLARE_CONST_UNICODE_STRING(_var, _string)                                                \
    const UNICODE_STRING _var = {(USHORT)(sizeof(_string) - sizeof(WCHAR)),                        \
                                 (USHORT)sizeof(_string), (PWCH)(_string)}
#define DECLARE_GLOBAL_CONST_UNICODE_STRING(_var, _str) DECLARE_CONST_UNICODE_STRING(_var, _str)
#define DECLARE_UNICODE_STRING_SIZE(_var, _size)                                                   \
    WCHAR _var##_buffer[_size];                                                                    \
    UNICODE_STRING _var = {0, (USHORT)((_size) * sizeof(WCHAR)), _var##_buffer}

SOFTNDK_WDK_API VOID RtlInitUnicodeString(PUNICODE_STRING DestinationString, PCWSTR SourceString);
#define RtlInitEmptyUnicodeString(_ucStr, _buf, _bufSize)                                          \
    ((_ucStr)->Length = 0, (_ucStr)->MaximumLength = (USHORT)(_bufSize), (_ucStr)->Buffer = (_buf))
SOFTNDK_WDK_API VOID RtlInitAnsiString(PANSI_STRING DestinationString, PCSTR SourceString);
#define RtlInitString(d, s) RtlInitAnsiString((d), (s))
SOFTNDK_WDK_API LONG RtlCompareUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2,
                                             BOOLEAN CaseInSensitive);
SOFTNDK_WDK_API BOOLEAN RtlEqualUnicodeString(PCUNICODE_STRING String1, PCUNICODE_STRING String2,
                                              BOOLEAN CaseInSensitive);
SOFTNDK_WDK_API VOID RtlCopyUnicodeString(PUNICODE_STRING DestinationString,
                                          PCUNICODE_STRING SourceString);

/* ------------------------------------------------------------------------------------------ */
/* Pool. Every allocation carries its tag; the harness keeps per-tag counts and bytes and the
 * runner reports what is still allocated at unload (softndk_wdk.h: SoftNdkWdkQueryPool).
 * Allocations of PAGE_SIZE or more are page-aligned, smaller ones 16-byte aligned, as on
 * Windows. Paged pool at DISPATCH_LEVEL, a free with the wrong tag, a double free or a foreign
 * pointer bugcheck (BAD_POOL_CALLER). Uninitialised allocations are filled with 0xBD so that
 * reading them is visible. */
typedef enum _POOL_TYPE {
    NonPagedPool = 0,
    NonPagedPoolExecute = 0,
    PagedPool = 1,
    NonPagedPoolMustSucceed = 2,
    DontUseThisType = 3,
    NonPagedPoolCacheAligned = 4,
    PagedPoolCacheAligned = 5,
    NonPagedPoolCacheAlignedMustS = 6,
    MaxPoolType = 7,
    NonPagedPoolBase = 0,
    NonPagedPoolSession = 32,
    PagedPoolSession = 33,
    NonPagedPoolNx = 512,
    NonPagedPoolNxCacheAligned = 516,
    NonPagedPoolSessionNx = 544
} POOL_TYPE;
#define POOL_COLD_ALLOCATION 256
#define POOL_NX_ALLOCATION 512
#define POOL_ZERO_ALLOCATION 1024
#define POOL_RAISE_IF_ALLOCATION_FAILURE 16

#define POOL_FLAG_REQUIRED_START 0x0000000000000001ULL
#define POOL_FLAG_USE_QUOTA 0x0000000000000001ULL
#define POOL_FLAG_UNINITIALIZED 0x0000000000000002ULL
#define POOL_FLAG_SESSION 0x0000000000000004ULL
#define POOL_FLAG_CACHE_ALIGNED 0x0000000000000008ULL
#define POOL_FLAG_RESERVED1 0x0000000000000010ULL
#define POOL_FLAG_RAISE_ON_FAILURE 0x0000000000000020ULL
#define POOL_FLAG_NON_PAGED 0x0000000000000040ULL
#define POOL_FLAG_NON_PAGED_EXECUTE 0x0000000000000080ULL
#define POOL_FLAG_PAGED 0x0000000000000100ULL
#define POOL_FLAG_RESERVED2 0x0000000000000200ULL
#define POOL_FLAG_RESERVED3 0x0000000000000400ULL
#define POOL_FLAG_REQUIRED_END 0x0000000080000000ULL
#define POOL_FLAG_OPTIONAL_START 0x0000000100000000ULL
#define POOL_FLAG_SPECIAL_POOL 0x0000000100000000ULL
#define POOL_FLAG_OPTIONAL_END 0x8000000000000000ULL

SOFTNDK_WDK_API PVOID ExAllocatePoolWithTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
/* Zeroed unless POOL_FLAG_UNINITIALIZED; exactly one of NON_PAGED, NON_PAGED_EXECUTE, PAGED;
 * Tag must not be 0; unknown required flags bugcheck (BAD_POOL_CALLER). */
SOFTNDK_WDK_API PVOID ExAllocatePool2(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag);
SOFTNDK_WDK_API PVOID ExAllocatePoolZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
SOFTNDK_WDK_API PVOID ExAllocatePoolUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes,
                                                  ULONG Tag);
SOFTNDK_WDK_API VOID ExFreePoolWithTag(PVOID P, ULONG Tag);
SOFTNDK_WDK_API VOID ExFreePool(PVOID P);
/* Tag 'None' as Windows charges untagged allocations. */
#define ExAllocatePool(type, size) ExAllocatePoolWithTag((type), (size), 0x656E6F4Eu)

/* ExInitializeDriverRuntime(DrvRtPoolNxOptIn), which drivers built with
 * POOL_NX_OPTIN / POOL_ZERO_DOWN_LEVEL_SUPPORT call first: nothing to set up here. */
typedef enum _SOFTNDK_WDK_DRIVER_RUNTIME { DrvRtPoolNxOptIn = 1 } SOFTNDK_WDK_DRIVER_RUNTIME;
#define ExInitializeDriverRuntime(RuntimeFlags) ((void)(RuntimeFlags))

/* Priorities: a hint for when memory is short, which it never is here; accepted and ignored
 * (a value outside the enum is too: Windows does not check it either). */
typedef enum _EX_POOL_PRIORITY {
    LowPoolPriority,
    LowPoolPrioritySpecialPoolOverrun = 8,
    LowPoolPrioritySpecialPoolUnderrun = 9,
    NormalPoolPriority = 16,
    NormalPoolPrioritySpecialPoolOverrun = 24,
    NormalPoolPrioritySpecialPoolUnderrun = 25,
    HighPoolPriority = 32,
    HighPoolPrioritySpecialPoolOverrun = 40,
    HighPoolPrioritySpecialPoolUnderrun = 41
} EX_POOL_PRIORITY;
SOFTNDK_WDK_API PVOID ExAllocatePoolWithTagPriority(POOL_TYPE PoolType, SIZE_T NumberOfBytes,
                                                    ULONG Tag, EX_POOL_PRIORITY Priority);
SOFTNDK_WDK_API PVOID ExAllocatePoolPriorityZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes,
                                                 ULONG Tag, EX_POOL_PRIORITY Priority);
SOFTNDK_WDK_API PVOID ExAllocatePoolPriorityUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes,
                                                          ULONG Tag, EX_POOL_PRIORITY Priority);
/* Quota is not charged (there is no process to charge); the allocation is a plain one. */
SOFTNDK_WDK_API PVOID ExAllocatePoolWithQuotaTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes,
                                                 ULONG Tag);
SOFTNDK_WDK_API PVOID ExAllocatePoolQuotaZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
SOFTNDK_WDK_API PVOID ExAllocatePoolQuotaUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes,
                                                       ULONG Tag);
#define ExAllocatePoolWithQuota(type, size) ExAllocatePoolWithQuotaTag((type), (size), 0x656E6F4Eu)

/* ExAllocatePool3: ExAllocatePool2 with extended parameters. Priority is accepted (ignored as
 * above); a secure-pool or any other type is refused with NULL and a log line. */
typedef enum POOL_EXTENDED_PARAMETER_TYPE {
    PoolExtendedParameterInvalidType = 0,
    PoolExtendedParameterPriority,
    PoolExtendedParameterSecurePool,
    PoolExtendedParameterNumaNode,
    PoolExtendedParameterMax
} POOL_EXTENDED_PARAMETER_TYPE;
#define POOL_EXTENDED_PARAMETER_TYPE_BITS           8
#define POOL_EXTENDED_PARAMETER_REQUIRED_FIELD_BITS 1
#define POOL_EXTENDED_PARAMETER_RESERVED_BITS       (64 - POOL_EXTENDED_PARAMETER_TYPE_BITS - 1)
typedef struct _POOL_EXTENDED_PARAMETER {
    struct {
        ULONG64 Type : POOL_EXTENDED_PARAMETER_TYPE_BITS;
        ULONG64 Optional : POOL_EXTENDED_PARAMETER_REQUIRED_FIELD_BITS;
        ULONG64 Reserved : POOL_EXTENDED_PARAMETER_RESERVED_BITS;
    };
    union {
        ULONG64 Reserved2;
        PVOID Reserved3;
        EX_POOL_PRIORITY Priority;
        PVOID SecurePoolParams;
        ULONG PreferredNode;
    };
} POOL_EXTENDED_PARAMETER, *PPOOL_EXTENDED_PARAMETER;
typedef const POOL_EXTENDED_PARAMETER *PCPOOL_EXTENDED_PARAMETER;
SOFTNDK_WDK_API PVOID ExAllocatePool3(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag,
                                      PCPOOL_EXTENDED_PARAMETER ExtendedParameters,
                                      ULONG ExtendedParametersCount);
/* ExFreePool2: ExFreePoolWithTag; extended parameters are accepted and ignored. */
SOFTNDK_WDK_API VOID ExFreePool2(PVOID P, ULONG Tag, PCPOOL_EXTENDED_PARAMETER ExtendedParameters,
                                 ULONG ExtendedParametersCount);

/* Lookaside lists: every allocation is a fresh pool block with the list's tag and every free
 * goes back to the pool (no caching), so that the pool's use-after-free checks see them. */
typedef PVOID ALLOCATE_FUNCTION(_In_ POOL_TYPE PoolType, _In_ SIZE_T NumberOfBytes, _In_ ULONG Tag);
typedef ALLOCATE_FUNCTION *PALLOCATE_FUNCTION;
typedef VOID FREE_FUNCTION(_In_ PVOID Buffer);
typedef FREE_FUNCTION *PFREE_FUNCTION;
typedef struct _LOOKASIDE_LIST_EX LOOKASIDE_LIST_EX, *PLOOKASIDE_LIST_EX;
typedef PVOID ALLOCATE_FUNCTION_EX(_In_ POOL_TYPE PoolType, _In_ SIZE_T NumberOfBytes,
                                   _In_ ULONG Tag, _Inout_ PLOOKASIDE_LIST_EX Lookaside);
typedef ALLOCATE_FUNCTION_EX *PALLOCATE_FUNCTION_EX;
typedef VOID FREE_FUNCTION_EX(_In_ PVOID Buffer, _Inout_ PLOOKASIDE_LIST_EX Lookaside);
typedef FREE_FUNCTION_EX *PFREE_FUNCTION_EX;
typedef struct _SOFTNDK_WDK_LOOKASIDE {
    POOL_TYPE Type;
    ULONG Tag;
    SIZE_T Size;
    PALLOCATE_FUNCTION Allocate;
    PFREE_FUNCTION Free;
    PALLOCATE_FUNCTION_EX AllocateEx;
    PFREE_FUNCTION_EX FreeEx;
    volatile LONG Outstanding;
} SOFTNDK_WDK_LOOKASIDE;
typedef struct _NPAGED_LOOKASIDE_LIST {
    SOFTNDK_WDK_LOOKASIDE L;
} NPAGED_LOOKASIDE_LIST, *PNPAGED_LOOKASIDE_LIST;
typedef struct _PAGED_LOOKASIDE_LIST {
    SOFTNDK_WDK_LOOKASIDE L;
} PAGED_LOOKASIDE_LIST, *PPAGED_LOOKASIDE_LIST;
struct _LOOKASIDE_LIST_EX {
    SOFTNDK_WDK_LOOKASIDE L;
};
#define EX_LOOKASIDE_LIST_EX_FLAGS_RAISE_ON_FAIL 0x00000001
#define EX_LOOKASIDE_LIST_EX_FLAGS_FAIL_NO_RAISE 0x00000002
#define LOOKASIDE_MINIMUM_BLOCK_SIZE             16 /* sizeof(SLIST_ENTRY) on x64 */
SOFTNDK_WDK_API VOID ExInitializeNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside,
                                                     PALLOCATE_FUNCTION Allocate,
                                                     PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size,
                                                     ULONG Tag, USHORT Depth);
SOFTNDK_WDK_API VOID ExDeleteNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside);
SOFTNDK_WDK_API PVOID ExAllocateFromNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside);
SOFTNDK_WDK_API VOID ExFreeToNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry);
SOFTNDK_WDK_API VOID ExInitializePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside,
                                                    PALLOCATE_FUNCTION Allocate,
                                                    PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size,
                                                    ULONG Tag, USHORT Depth);
SOFTNDK_WDK_API VOID ExDeletePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside);
SOFTNDK_WDK_API PVOID ExAllocateFromPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside);
SOFTNDK_WDK_API VOID ExFreeToPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry);
SOFTNDK_WDK_API NTSTATUS ExInitializeLookasideListEx(PLOOKASIDE_LIST_EX Lookaside,
                                                     PALLOCATE_FUNCTION_EX Allocate,
                                                     PFREE_FUNCTION_EX Free, POOL_TYPE PoolType,
                                                     ULONG Flags, SIZE_T Size, ULONG Tag,
                                                     USHORT Depth);
SOFTNDK_WDK_API VOID ExDeleteLookasideListEx(PLOOKASIDE_LIST_EX Lookaside);
SOFTNDK_WDK_API PVOID ExAllocateFromLookasideListEx(PLOOKASIDE_LIST_EX Lookaside);
SOFTNDK_WDK_API VOID ExFreeToLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PVOID Entry);
SOFTNDK_WDK_API VOID ExFlushLookasideListEx(PLOOKASIDE_LIST_EX Lookaside);

/* ------------------------------------------------------------------------------------------ */
/* Rundown protection. Count holds 2 x references, bit 0 = rundown started. */
typedef struct _EX_RUNDOWN_REF {
    union {
        volatile ULONG_PTR Count;
        volatile PVOID Ptr;
    };
} EX_RUNDOWN_REF, *PEX_RUNDOWN_REF;

SOFTNDK_WDK_API VOID ExInitializeRundownProtection(PEX_RUNDOWN_REF RunRef);
SOFTNDK_WDK_API VOID ExReInitializeRundownProtection(PEX_RUNDOWN_REF RunRef);
SOFTNDK_WDK_API BOOLEAN ExAcquireRundownProtection(PEX_RUNDOWN_REF RunRef);
SOFTNDK_WDK_API BOOLEAN ExAcquireRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count);
SOFTNDK_WDK_API VOID ExReleaseRundownProtection(PEX_RUNDOWN_REF RunRef);
SOFTNDK_WDK_API VOID ExReleaseRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count);
/* Blocks (IRQL < DISPATCH_LEVEL) until every reference is released; later acquires fail. */
SOFTNDK_WDK_API VOID ExWaitForRundownProtectionRelease(PEX_RUNDOWN_REF RunRef);
SOFTNDK_WDK_API VOID ExRundownCompleted(PEX_RUNDOWN_REF RunRef);

/* ------------------------------------------------------------------------------------------ */
/* Driver and device objects, IRPs (a minimal IRP below). */
typedef struct _IRP IRP, *PIRP;
typedef struct _DEVICE_OBJECT DEVICE_OBJECT, *PDEVICE_OBJECT;
typedef struct _DRIVER_OBJECT DRIVER_OBJECT, *PDRIVER_OBJECT;
typedef struct _FILE_OBJECT FILE_OBJECT, *PFILE_OBJECT;
typedef struct _KPROCESS *PEPROCESS, *PKPROCESS;
typedef struct _KTHREAD *PETHREAD, *PKTHREAD;
typedef PVOID PSECURITY_DESCRIPTOR;

typedef NTSTATUS DRIVER_INITIALIZE(_In_ PDRIVER_OBJECT DriverObject,
                                   _In_ PUNICODE_STRING RegistryPath);
typedef DRIVER_INITIALIZE *PDRIVER_INITIALIZE;
typedef VOID DRIVER_UNLOAD(_In_ PDRIVER_OBJECT DriverObject);
typedef DRIVER_UNLOAD *PDRIVER_UNLOAD;
typedef NTSTATUS DRIVER_ADD_DEVICE(_In_ PDRIVER_OBJECT DriverObject,
                                   _In_ PDEVICE_OBJECT PhysicalDeviceObject);
typedef DRIVER_ADD_DEVICE *PDRIVER_ADD_DEVICE;
typedef NTSTATUS DRIVER_DISPATCH(_In_ PDEVICE_OBJECT DeviceObject, _Inout_ PIRP Irp);
typedef DRIVER_DISPATCH *PDRIVER_DISPATCH;
typedef VOID DRIVER_STARTIO(_Inout_ PDEVICE_OBJECT DeviceObject, _Inout_ PIRP Irp);
typedef DRIVER_STARTIO *PDRIVER_STARTIO;

#define IRP_MJ_CREATE 0x00
#define IRP_MJ_CLOSE 0x02
#define IRP_MJ_READ 0x03
#define IRP_MJ_WRITE 0x04
#define IRP_MJ_DEVICE_CONTROL 0x0e
#define IRP_MJ_INTERNAL_DEVICE_CONTROL 0x0f
#define IRP_MJ_SHUTDOWN 0x10
#define IRP_MJ_CLEANUP 0x12
#define IRP_MJ_POWER 0x16
#define IRP_MJ_SYSTEM_CONTROL 0x17
#define IRP_MJ_PNP 0x1b
#define IRP_MJ_MAXIMUM_FUNCTION 0x1b

#define CTL_CODE(DeviceType, Function, Method, Access)                                             \
    (((DeviceType) << 16) | ((Access) << 14) | ((Function) << 2) | (Method))
#define DEVICE_TYPE_FROM_CTL_CODE(ctrlCode) (((ULONG)(ctrlCode & 0xffff0000)) >> 16)
#define METHOD_FROM_CTL_CODE(ctrlCode)      ((ULONG)(ctrlCode & 3))
#define METHOD_BUFFERED                     0
#define METHOD_IN_DIRECT                    1
#define METHOD_OUT_DIRECT                   2
#define METHOD_NEITHER                      3
#define FILE_ANY_ACCESS                     0
#define FILE_READ_ACCESS                    0x0001
#define FILE_WRITE_ACCESS                   0x0002
#define FILE_DEVICE_NETWORK 0x00000012
#define FILE_DEVICE_UNKNOWN 0x00000022
#define FILE_DEVICE_TRANSPORT 0x00000021
#define FILE_DEVICE_SECURE_OPEN 0x00000100
#define DO_BUFFERED_IO 0x00000004
#define DO_EXCLUSIVE 0x00000008
#define DO_DIRECT_IO 0x00000010
#define DO_DEVICE_INITIALIZING 0x00000080

typedef struct _DRIVER_EXTENSION {
    struct _DRIVER_OBJECT *DriverObject;
    PDRIVER_ADD_DEVICE AddDevice;
    ULONG Count;
    UNICODE_STRING ServiceKeyName;
} DRIVER_EXTENSION, *PDRIVER_EXTENSION;

struct _DRIVER_OBJECT {
    CSHORT Type;
    CSHORT Size;
    PDEVICE_OBJECT DeviceObject; /* devices created by IoCreateDevice, newest first */
    ULONG Flags;
    PVOID DriverStart;
    ULONG DriverSize;
    PVOID DriverSection;
    PDRIVER_EXTENSION DriverExtension;
    UNICODE_STRING DriverName;
    PUNICODE_STRING HardwareDatabase;
    PVOID FastIoDispatch;
    PDRIVER_INITIALIZE DriverInit;
    PDRIVER_STARTIO DriverStartIo;
    PDRIVER_UNLOAD DriverUnload;
    PDRIVER_DISPATCH MajorFunction[IRP_MJ_MAXIMUM_FUNCTION + 1];
};

struct _DEVICE_OBJECT {
    CSHORT Type;
    USHORT Size;
    LONG ReferenceCount;
    struct _DRIVER_OBJECT *DriverObject;
    struct _DEVICE_OBJECT *NextDevice;
    struct _DEVICE_OBJECT *AttachedDevice;
    PIRP CurrentIrp;
    ULONG Flags;
    ULONG Characteristics;
    PVOID DeviceExtension;
    DEVICE_TYPE DeviceType;
    CCHAR StackSize;
    ULONG AlignmentRequirement;
    UNICODE_STRING SoftNdkName; /* a copy of the name given to IoCreateDevice (harness) */
};

SOFTNDK_WDK_API NTSTATUS IoCreateDevice(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize,
                                        PUNICODE_STRING DeviceName, DEVICE_TYPE DeviceType,
                                        ULONG DeviceCharacteristics, BOOLEAN Exclusive,
                                        PDEVICE_OBJECT *DeviceObject);
SOFTNDK_WDK_API VOID IoDeleteDevice(PDEVICE_OBJECT DeviceObject);

/* ------------------------------------------------------------------------------------------ */
/* A minimal IRP: what a driver needs to complete requests through IRPs of its own
 * (IoAllocateIrp, a completion routine, IoCompleteRequest, IoFreeIrp) and to call its own
 * dispatch routines (IoCallDriver). The runner sends none; no I/O manager thread completion, no
 * buffered or direct I/O setup. Layout is the harness's (source compatibility). */
typedef struct _IO_STATUS_BLOCK {
    union {
        NTSTATUS Status;
        PVOID Pointer;
    };
    ULONG_PTR Information;
} IO_STATUS_BLOCK, *PIO_STATUS_BLOCK;

typedef NTSTATUS IO_COMPLETION_ROUTINE(_In_ PDEVICE_OBJECT DeviceObject, _In_ PIRP Irp,
                                       _In_reads_opt_(_Inexpressible_("varies")) PVOID Context);
typedef IO_COMPLETION_ROUTINE *PIO_COMPLETION_ROUTINE;
typedef VOID DRIVER_CANCEL(_Inout_ struct _DEVICE_OBJECT *DeviceObject, _Inout_ PIRP Irp);
typedef DRIVER_CANCEL *PDRIVER_CANCEL;

#define STATUS_CONTINUE_COMPLETION STATUS_SUCCESS
#define SL_PENDING_RETURNED        0x01
#define SL_ERROR_RETURNED          0x02
#define SL_INVOKE_ON_CANCEL        0x20
#define SL_INVOKE_ON_SUCCESS       0x40
#define SL_INVOKE_ON_ERROR         0x80

typedef struct _IO_STACK_LOCATION {
    UCHAR MajorFunction;
    UCHAR MinorFunction;
    UCHAR Flags;
    UCHAR Control;
    union {
        struct {
            ULONG OutputBufferLength;
            ULONG POINTER_ALIGNMENT InputBufferLength;
            ULONG POINTER_ALIGNMENT IoControlCode;
            PVOID Type3InputBuffer;
        } DeviceIoControl;
        struct {
            ULONG Length;
            ULONG POINTER_ALIGNMENT Key;
            LARGE_INTEGER ByteOffset;
        } Read, Write;
        struct {
            PVOID Argument1;
            PVOID Argument2;
            PVOID Argument3;
            PVOID Argument4;
        } Others;
    } Parameters;
    PDEVICE_OBJECT DeviceObject;
    PFILE_OBJECT FileObject;
    PIO_COMPLETION_ROUTINE CompletionRoutine;
    PVOID Context;
} IO_STACK_LOCATION, *PIO_STACK_LOCATION;

struct _IRP {
    CSHORT Type;
    USHORT Size;
    PMDL MdlAddress;
    ULONG Flags;
    union {
        struct _IRP *MasterIrp;
        volatile LONG IrpCount;
        PVOID SystemBuffer;
    } AssociatedIrp;
    LIST_ENTRY ThreadListEntry;
    IO_STATUS_BLOCK IoStatus;
    KPROCESSOR_MODE RequestorMode;
    BOOLEAN PendingReturned;
    CHAR StackCount;
    CHAR CurrentLocation; /* StackCount + 1 when no driver owns a location yet */
    BOOLEAN Cancel;
    KIRQL CancelIrql;
    PIO_STATUS_BLOCK UserIosb;
    PKEVENT UserEvent;
    volatile PDRIVER_CANCEL CancelRoutine;
    PVOID UserBuffer;
    union {
        struct {
            union {
                LIST_ENTRY ListEntry;
                PVOID DriverContext[4];
            };
            PETHREAD Thread;
            struct _IO_STACK_LOCATION *CurrentStackLocation;
        } Overlay;
    } Tail;
    ULONG SoftNdkState; /* harness: allocated / completing / completed, for the checks */
    IO_STACK_LOCATION SoftNdkStack[1]; /* StackCount locations */
};

/* IoAllocateIrp: StackSize locations, charged to the pool as tag 'Irp '; ChargeQuota ignored.
 * IoFreeIrp of an IRP that is being completed or was not allocated here bugchecks. */
SOFTNDK_WDK_API PIRP IoAllocateIrp(CCHAR StackSize, BOOLEAN ChargeQuota);
SOFTNDK_WDK_API VOID IoFreeIrp(PIRP Irp);
SOFTNDK_WDK_API VOID IoReuseIrp(PIRP Irp, NTSTATUS Iostatus);
SOFTNDK_WDK_API USHORT IoSizeOfIrp(CCHAR StackSize);
SOFTNDK_WDK_API VOID IoInitializeIrp(PIRP Irp, USHORT PacketSize, CCHAR StackSize);
/* Runs the completion routines from the current location up (each as its SL_INVOKE_* flags
 * say, with the device object of the location above it); stops at one that returns
 * STATUS_MORE_PROCESSING_REQUIRED. Past the top: *UserIosb = IoStatus and UserEvent is set.
 * The IRP stays the allocator's (IoFreeIrp). Completing an IRP twice bugchecks
 * (MULTIPLE_IRP_COMPLETE_REQUESTS); so does a pending STATUS_PENDING status. */
SOFTNDK_WDK_API VOID IofCompleteRequest(PIRP Irp, CCHAR PriorityBoost);
#define IoCompleteRequest(Irp, PriorityBoost) IofCompleteRequest((Irp), (PriorityBoost))
/* Moves to the next location and calls the device's driver's MajorFunction for it (or
 * completes the IRP with STATUS_INVALID_DEVICE_REQUEST when it has none). */
SOFTNDK_WDK_API NTSTATUS IofCallDriver(PDEVICE_OBJECT DeviceObject, PIRP Irp);
#define IoCallDriver(DeviceObject, Irp) IofCallDriver((DeviceObject), (Irp))
/* Sets Cancel and calls the cancel routine, if any, with the cancel spin lock held as
 * Windows does (release it with IoReleaseCancelSpinLock(Irp->CancelIrql)). */
SOFTNDK_WDK_API BOOLEAN IoCancelIrp(PIRP Irp);
SOFTNDK_WDK_API VOID IoAcquireCancelSpinLock(PKIRQL Irql);
SOFTNDK_WDK_API VOID IoReleaseCancelSpinLock(KIRQL Irql);
#define IoSetCancelRoutine(Irp, NewCancelRoutine)                                                  \
    ((PDRIVER_CANCEL)__atomic_exchange_n(&(Irp)->CancelRoutine,                                    \
                                         (PDRIVER_CANCEL)(NewCancelRoutine), __ATOMIC_SEQ_CST))

FORCEINLINE PIO_STACK_LOCATION IoGetCurrentIrpStackLocation(PIRP Irp)
{
    return Irp->Tail.Overlay.CurrentStackLocation;
}
FORCEINLINE PIO_STACK_LOCATION IoGetNextIrpStackLocation(PIRP Irp)
{
    return Irp->Tail.Overlay.CurrentStackLocation - 1;
}
FORCEINLINE VOID IoSetNextIrpStackLocation(PIRP Irp)
{
    Irp->CurrentLocation--;
    Irp->Tail.Overlay.CurrentStackLocation--;
}
FORCEINLINE VOID IoSkipCurrentIrpStackLocation(PIRP Irp)
{
    Irp->CurrentLocation++;
    Irp->Tail.Overlay.CurrentStackLocation++;
}
FORCEINLINE VOID IoCopyCurrentIrpStackLocationToNext(PIRP Irp)
{
    PIO_STACK_LOCATION cur = IoGetCurrentIrpStackLocation(Irp), next = cur - 1;
    memcpy(next, cur, offsetof(IO_STACK_LOCATION, CompletionRoutine));
    next->Control = 0;
}
FORCEINLINE VOID IoMarkIrpPending(PIRP Irp)
{
    IoGetCurrentIrpStackLocation(Irp)->Control |= SL_PENDING_RETURNED;
}
FORCEINLINE VOID IoSetCompletionRoutine(PIRP Irp, PIO_COMPLETION_ROUTINE CompletionRoutine,
                                        PVOID Context, BOOLEAN InvokeOnSuccess,
                                        BOOLEAN InvokeOnError, BOOLEAN InvokeOnCancel)
{
    PIO_STACK_LOCATION next = IoGetNextIrpStackLocation(Irp);
    next->CompletionRoutine = CompletionRoutine;
    next->Context = Context;
    next->Control = 0;
    if (InvokeOnSuccess)
        next->Control |= SL_INVOKE_ON_SUCCESS;
    if (InvokeOnError)
        next->Control |= SL_INVOKE_ON_ERROR;
    if (InvokeOnCancel)
        next->Control |= SL_INVOKE_ON_CANCEL;
}

/* No DriverEntry declaration: Windows' headers have none, the driver declares its own
 * (`DRIVER_INITIALIZE DriverEntry;`, or a miniport's `ULONG DriverEntry(PVOID, PVOID)`), and a
 * declaration here would clash with the second. The runner finds it with dlsym: build the driver
 * with default visibility (pkg-config softndk-wdk and softndk::wdk do not hide symbols). */

/* ------------------------------------------------------------------------------------------ */
/* Work items: run at PASSIVE_LEVEL on the harness worker pool. A queued item keeps its device
 * object (and the driver) from going away: the runner waits for the pool to drain after
 * DriverUnload. Queueing an item that is still queued, or freeing it while queued, bugchecks. */
typedef struct _IO_WORKITEM IO_WORKITEM, *PIO_WORKITEM;
typedef VOID IO_WORKITEM_ROUTINE(_In_ PDEVICE_OBJECT DeviceObject, _In_opt_ PVOID Context);
typedef IO_WORKITEM_ROUTINE *PIO_WORKITEM_ROUTINE;
typedef VOID IO_WORKITEM_ROUTINE_EX(_In_ PVOID IoObject, _In_opt_ PVOID Context,
                                    _In_ PIO_WORKITEM IoWorkItem);
typedef IO_WORKITEM_ROUTINE_EX *PIO_WORKITEM_ROUTINE_EX;

typedef enum _WORK_QUEUE_TYPE {
    CriticalWorkQueue,
    DelayedWorkQueue,
    HyperCriticalWorkQueue,
    NormalWorkQueue,
    BackgroundWorkQueue,
    RealTimeWorkQueue,
    SuperCriticalWorkQueue,
    MaximumWorkQueue,
    CustomPriorityWorkQueue = 32
} WORK_QUEUE_TYPE;

SOFTNDK_WDK_API PIO_WORKITEM IoAllocateWorkItem(PDEVICE_OBJECT DeviceObject);
SOFTNDK_WDK_API VOID IoFreeWorkItem(PIO_WORKITEM IoWorkItem);
SOFTNDK_WDK_API VOID IoQueueWorkItem(PIO_WORKITEM IoWorkItem, PIO_WORKITEM_ROUTINE WorkerRoutine,
                                     WORK_QUEUE_TYPE QueueType, PVOID Context);
SOFTNDK_WDK_API VOID IoQueueWorkItemEx(PIO_WORKITEM IoWorkItem,
                                       PIO_WORKITEM_ROUTINE_EX WorkerRoutine,
                                       WORK_QUEUE_TYPE QueueType, PVOID Context);
SOFTNDK_WDK_API ULONG IoSizeofWorkItem(VOID);
SOFTNDK_WDK_API VOID IoInitializeWorkItem(PVOID IoObject, PIO_WORKITEM IoWorkItem);
SOFTNDK_WDK_API VOID IoUninitializeWorkItem(PIO_WORKITEM IoWorkItem);

/* ------------------------------------------------------------------------------------------ */
/* MDLs, on the minimal MDL of ndkpi.h. There are no physical pages: "locking" records the
 * state (MDL_PAGES_LOCKED) so that the contract (lock before use, unlock before free) is
 * still checked, and the system address of an MDL is its virtual address. */
#define MDL_MAPPED_TO_SYSTEM_VA 0x0001
#define MDL_PAGES_LOCKED 0x0002
#define MDL_SOURCE_IS_NONPAGED_POOL 0x0004
#define MDL_ALLOCATED_FIXED_SIZE 0x0008
#define MDL_PARTIAL 0x0010
#define MDL_PARTIAL_HAS_BEEN_MAPPED 0x0020
#define MDL_IO_PAGE_READ 0x0040
#define MDL_WRITE_OPERATION 0x0080
#define MDL_LOCKED_PAGE_TABLES 0x0100
#define MDL_IO_SPACE 0x0800
#define MDL_NETWORK_HEADER 0x1000
#define MDL_MAPPING_CAN_FAIL 0x2000
#define MDL_ALLOCATED_MUST_SUCCEED 0x4000

typedef enum _LOCK_OPERATION { IoReadAccess, IoWriteAccess, IoModifyAccess } LOCK_OPERATION;
typedef enum _MM_PAGE_PRIORITY {
    LowPagePriority,
    NormalPagePriority = 16,
    HighPagePriority = 32
} MM_PAGE_PRIORITY;
#define MdlMappingNoWrite 0x80000000
#define MdlMappingNoExecute 0x40000000

#define MmGetMdlBaseVa(Mdl) ((Mdl)->StartVa)
#define MmSizeOfMdl(Base, Length)                                                                  \
    ((SIZE_T)(sizeof(MDL) + ADDRESS_AND_SIZE_TO_SPAN_PAGES((Base), (Length)) * sizeof(PFN_NUMBER)))

/* Charged to the pool as tag 'Mdl '. With an Irp it becomes the IRP's MdlAddress (or, with
 * SecondaryBuffer, the end of its chain), as on Windows; IoFreeMdl stays the caller's. */
SOFTNDK_WDK_API PMDL IoAllocateMdl(PVOID VirtualAddress, ULONG Length, BOOLEAN SecondaryBuffer,
                                   BOOLEAN ChargeQuota, PIRP Irp);
SOFTNDK_WDK_API VOID IoFreeMdl(PMDL Mdl);
SOFTNDK_WDK_API VOID MmBuildMdlForNonPagedPool(PMDL MemoryDescriptorList);
SOFTNDK_WDK_API VOID MmProbeAndLockPages(PMDL MemoryDescriptorList, KPROCESSOR_MODE AccessMode,
                                         LOCK_OPERATION Operation);
SOFTNDK_WDK_API VOID MmUnlockPages(PMDL MemoryDescriptorList);
/* The MDL's virtual address; bugchecks if the MDL is neither locked nor built for non-paged
 * pool (Windows would map pages that are not resident). */
SOFTNDK_WDK_API PVOID MmGetSystemAddressForMdlSafe(PMDL Mdl, ULONG Priority);
#define MmGetSystemAddressForMdl(Mdl) MmGetSystemAddressForMdlSafe((Mdl), NormalPagePriority)

/* ------------------------------------------------------------------------------------------ */
/* More NTSTATUS codes drivers return and test for (values of Windows' ntstatus.h). */
#define STATUS_WAIT_1                          SOFTNDK_NTSTATUS(0x00000001L)
#define STATUS_WAIT_2                          SOFTNDK_NTSTATUS(0x00000002L)
#define STATUS_WAIT_3                          SOFTNDK_NTSTATUS(0x00000003L)
#define STATUS_WAIT_63                         SOFTNDK_NTSTATUS(0x0000003FL)
#define STATUS_ABANDONED_WAIT_0                SOFTNDK_NTSTATUS(0x00000080L)
#define STATUS_NOT_ALL_ASSIGNED                SOFTNDK_NTSTATUS(0x00000106L)
#define STATUS_SOME_NOT_MAPPED                 SOFTNDK_NTSTATUS(0x00000107L)
#define STATUS_BUFFER_ALL_ZEROS                SOFTNDK_NTSTATUS(0x00000117L)
#define STATUS_OBJECT_NAME_EXISTS              SOFTNDK_NTSTATUS(0x40000000L)
#define STATUS_NO_MORE_FILES                   SOFTNDK_NTSTATUS(0x80000006L)
#define STATUS_DEVICE_OFF_LINE                 SOFTNDK_NTSTATUS(0x80000010L)
#define STATUS_VERIFY_REQUIRED                 SOFTNDK_NTSTATUS(0x80000016L)
#define STATUS_ALREADY_DISCONNECTED            SOFTNDK_NTSTATUS(0x80000025L)
#define STATUS_INVALID_INFO_CLASS              SOFTNDK_NTSTATUS(0xC0000003L)
#define STATUS_NO_SUCH_FILE                    SOFTNDK_NTSTATUS(0xC000000FL)
#define STATUS_END_OF_FILE                     SOFTNDK_NTSTATUS(0xC0000011L)
#define STATUS_NO_MEDIA_IN_DEVICE              SOFTNDK_NTSTATUS(0xC0000013L)
#define STATUS_NONEXISTENT_SECTOR              SOFTNDK_NTSTATUS(0xC0000015L)
#define STATUS_CONFLICTING_ADDRESSES           SOFTNDK_NTSTATUS(0xC0000018L)
#define STATUS_INVALID_SYSTEM_SERVICE          SOFTNDK_NTSTATUS(0xC000001CL)
#define STATUS_INVALID_LOCK_SEQUENCE           SOFTNDK_NTSTATUS(0xC000001EL)
#define STATUS_ALREADY_COMMITTED               SOFTNDK_NTSTATUS(0xC0000021L)
#define STATUS_OBJECT_TYPE_MISMATCH            SOFTNDK_NTSTATUS(0xC0000024L)
#define STATUS_NOT_LOCKED                      SOFTNDK_NTSTATUS(0xC000002AL)
#define STATUS_NOT_COMMITTED                   SOFTNDK_NTSTATUS(0xC000002DL)
#define STATUS_DEVICE_ALREADY_ATTACHED         SOFTNDK_NTSTATUS(0xC0000038L)
#define STATUS_CRC_ERROR                       SOFTNDK_NTSTATUS(0xC000003FL)
#define STATUS_QUOTA_EXCEEDED                  SOFTNDK_NTSTATUS(0xC0000044L)
#define STATUS_INVALID_PAGE_PROTECTION         SOFTNDK_NTSTATUS(0xC0000045L)
#define STATUS_REVISION_MISMATCH               SOFTNDK_NTSTATUS(0xC0000059L)
#define STATUS_INVALID_OWNER                   SOFTNDK_NTSTATUS(0xC000005AL)
#define STATUS_INVALID_PRIMARY_GROUP           SOFTNDK_NTSTATUS(0xC000005BL)
#define STATUS_PRIVILEGE_NOT_HELD              SOFTNDK_NTSTATUS(0xC0000061L)
#define STATUS_LOGON_FAILURE                   SOFTNDK_NTSTATUS(0xC000006DL)
#define STATUS_INVALID_ACL                     SOFTNDK_NTSTATUS(0xC0000077L)
#define STATUS_INVALID_SID                     SOFTNDK_NTSTATUS(0xC0000078L)
#define STATUS_INVALID_SECURITY_DESCR          SOFTNDK_NTSTATUS(0xC0000079L)
#define STATUS_PROCEDURE_NOT_FOUND             SOFTNDK_NTSTATUS(0xC000007AL)
#define STATUS_INVALID_IMAGE_FORMAT            SOFTNDK_NTSTATUS(0xC000007BL)
#define STATUS_NO_TOKEN                        SOFTNDK_NTSTATUS(0xC000007CL)
#define STATUS_DISK_FULL                       SOFTNDK_NTSTATUS(0xC000007FL)
#define STATUS_FILE_INVALID                    SOFTNDK_NTSTATUS(0xC0000098L)
#define STATUS_DEVICE_DATA_ERROR               SOFTNDK_NTSTATUS(0xC000009CL)
#define STATUS_DEVICE_NOT_CONNECTED            SOFTNDK_NTSTATUS(0xC000009DL)
#define STATUS_MEDIA_WRITE_PROTECTED           SOFTNDK_NTSTATUS(0xC00000A2L)
#define STATUS_INVALID_PIPE_STATE              SOFTNDK_NTSTATUS(0xC00000ADL)
#define STATUS_ILLEGAL_FUNCTION                SOFTNDK_NTSTATUS(0xC00000AFL)
#define STATUS_REMOTE_NOT_LISTENING            SOFTNDK_NTSTATUS(0xC00000BCL)
#define STATUS_DUPLICATE_NAME                  SOFTNDK_NTSTATUS(0xC00000BDL)
#define STATUS_BAD_NETWORK_PATH                SOFTNDK_NTSTATUS(0xC00000BEL)
#define STATUS_NETWORK_BUSY                    SOFTNDK_NTSTATUS(0xC00000BFL)
#define STATUS_DEVICE_DOES_NOT_EXIST           SOFTNDK_NTSTATUS(0xC00000C0L)
#define STATUS_ADAPTER_HARDWARE_ERROR          SOFTNDK_NTSTATUS(0xC00000C2L)
#define STATUS_INVALID_NETWORK_RESPONSE        SOFTNDK_NTSTATUS(0xC00000C3L)
#define STATUS_UNEXPECTED_NETWORK_ERROR        SOFTNDK_NTSTATUS(0xC00000C4L)
#define STATUS_BAD_DEVICE_TYPE                 SOFTNDK_NTSTATUS(0xC00000CBL)
#define STATUS_REQUEST_NOT_ACCEPTED            SOFTNDK_NTSTATUS(0xC00000D0L)
#define STATUS_NOT_SAME_DEVICE                 SOFTNDK_NTSTATUS(0xC00000D4L)
#define STATUS_INVALID_USER_BUFFER             SOFTNDK_NTSTATUS(0xC00000E8L)
#define STATUS_UNEXPECTED_IO_ERROR             SOFTNDK_NTSTATUS(0xC00000E9L)
#define STATUS_INVALID_PARAMETER_5             SOFTNDK_NTSTATUS(0xC00000F3L)
#define STATUS_INVALID_PARAMETER_6             SOFTNDK_NTSTATUS(0xC00000F4L)
#define STATUS_INVALID_PARAMETER_7             SOFTNDK_NTSTATUS(0xC00000F5L)
#define STATUS_INVALID_PARAMETER_8             SOFTNDK_NTSTATUS(0xC00000F6L)
#define STATUS_INVALID_PARAMETER_9             SOFTNDK_NTSTATUS(0xC00000F7L)
#define STATUS_INVALID_PARAMETER_10            SOFTNDK_NTSTATUS(0xC00000F8L)
#define STATUS_INVALID_PARAMETER_11            SOFTNDK_NTSTATUS(0xC00000F9L)
#define STATUS_INVALID_PARAMETER_12            SOFTNDK_NTSTATUS(0xC00000FAL)
#define STATUS_DIRECTORY_NOT_EMPTY             SOFTNDK_NTSTATUS(0xC0000101L)
#define STATUS_NOT_A_DIRECTORY                 SOFTNDK_NTSTATUS(0xC0000103L)
#define STATUS_FILE_CLOSED                     SOFTNDK_NTSTATUS(0xC0000128L)
#define STATUS_UNRECOGNIZED_VOLUME             SOFTNDK_NTSTATUS(0xC000014FL)
#define STATUS_UNMAPPABLE_CHARACTER            SOFTNDK_NTSTATUS(0xC0000162L)
#define STATUS_INVALID_BLOCK_LENGTH            SOFTNDK_NTSTATUS(0xC0000173L)
#define STATUS_DEVICE_CONFIGURATION_ERROR      SOFTNDK_NTSTATUS(0xC0000182L)
#define STATUS_DRIVER_INTERNAL_ERROR           SOFTNDK_NTSTATUS(0xC0000183L)
#define STATUS_IO_DEVICE_ERROR                 SOFTNDK_NTSTATUS(0xC0000185L)
#define STATUS_DEVICE_PROTOCOL_ERROR           SOFTNDK_NTSTATUS(0xC0000186L)
#define STATUS_INSUFF_SERVER_RESOURCES         SOFTNDK_NTSTATUS(0xC0000205L)
#define STATUS_INVALID_ADDRESS_COMPONENT       SOFTNDK_NTSTATUS(0xC0000207L)
#define STATUS_ADDRESS_CLOSED                  SOFTNDK_NTSTATUS(0xC000020BL)
#define STATUS_CONNECTION_COUNT_LIMIT          SOFTNDK_NTSTATUS(0xC0000246L)
#define STATUS_RESOURCE_NOT_OWNED              SOFTNDK_NTSTATUS(0xC0000264L)
#define STATUS_INVALID_DEVICE_OBJECT_PARAMETER SOFTNDK_NTSTATUS(0xC0000369L)
#define STATUS_ALREADY_REGISTERED              SOFTNDK_NTSTATUS(0xC0000718L)
#define STATUS_HOPLIMIT_EXCEEDED               SOFTNDK_NTSTATUS(0xC000A012L)

/* ------------------------------------------------------------------------------------------ */
/* The compiler-intrinsic spellings (_Interlocked*) of the Interlocked operations above. */
#define _InterlockedIncrement              InterlockedIncrement
#define _InterlockedDecrement              InterlockedDecrement
#define _InterlockedExchange               InterlockedExchange
#define _InterlockedCompareExchange        InterlockedCompareExchange
#define _InterlockedExchangeAdd            InterlockedExchangeAdd
#define _InterlockedAnd                    InterlockedAnd
#define _InterlockedOr                     InterlockedOr
#define _InterlockedXor                    InterlockedXor
#define _InterlockedIncrement16            InterlockedIncrement16
#define _InterlockedDecrement16            InterlockedDecrement16
#define _InterlockedExchange16             InterlockedExchange16
#define _InterlockedCompareExchange16      InterlockedCompareExchange16
#define _InterlockedExchangeAdd16          InterlockedExchangeAdd16
#define _InterlockedAnd16                  InterlockedAnd16
#define _InterlockedOr16                   InterlockedOr16
#define _InterlockedXor16                  InterlockedXor16
#define _InterlockedExchange8              InterlockedExchange8
#define _InterlockedCompareExchange8       InterlockedCompareExchange8
#define _InterlockedExchangeAdd8           InterlockedExchangeAdd8
#define _InterlockedAnd8                   InterlockedAnd8
#define _InterlockedOr8                    InterlockedOr8
#define _InterlockedXor8                   InterlockedXor8
#define _InterlockedIncrement64            InterlockedIncrement64
#define _InterlockedDecrement64            InterlockedDecrement64
#define _InterlockedExchange64             InterlockedExchange64
#define _InterlockedCompareExchange64      InterlockedCompareExchange64
#define _InterlockedExchangeAdd64          InterlockedExchangeAdd64
#define _InterlockedAnd64                  InterlockedAnd64
#define _InterlockedOr64                   InterlockedOr64
#define _InterlockedXor64                  InterlockedXor64
#define _InterlockedExchangePointer        InterlockedExchangePointer
#define _InterlockedCompareExchangePointer InterlockedCompareExchangePointer

/* ------------------------------------------------------------------------------------------ */
/* The I/O error log. IoAllocateErrorLogEntry gives a zeroed packet of EntrySize bytes (NULL
 * above ERROR_LOG_MAXIMUM_SIZE or below the packet header, as Windows); IoWriteErrorLogEntry
 * writes it as one readable line on stderr (`wdkrun: event log: ...`: the driver, the status
 * with its name, the unique value, the final status, the insertion strings, the dump data) and
 * frees it; IoFreeErrorLogEntry frees an entry not written. Offsets and counts that do not fit
 * in the entry are reported in the line, never read outside it. */
typedef struct _IO_ERROR_LOG_PACKET {
    UCHAR MajorFunctionCode;
    UCHAR RetryCount;
    USHORT DumpDataSize;
    USHORT NumberOfStrings;
    USHORT StringOffset;
    USHORT EventCategory;
    NTSTATUS ErrorCode;
    ULONG UniqueErrorValue;
    NTSTATUS FinalStatus;
    ULONG SequenceNumber;
    ULONG IoControlCode;
    LARGE_INTEGER DeviceOffset;
    ULONG DumpData[1];
} IO_ERROR_LOG_PACKET, *PIO_ERROR_LOG_PACKET;
#define ERROR_LOG_LIMIT_SIZE        (256 - 16)
#define ERROR_LOG_MAXIMUM_SIZE      ERROR_LOG_LIMIT_SIZE
#define IO_ERROR_LOG_MESSAGE_LENGTH 1024
SOFTNDK_WDK_API PVOID IoAllocateErrorLogEntry(PVOID IoObject, UCHAR EntrySize);
SOFTNDK_WDK_API VOID IoWriteErrorLogEntry(PVOID ElEntry);
SOFTNDK_WDK_API VOID IoFreeErrorLogEntry(PVOID ElEntry);

/* ------------------------------------------------------------------------------------------ */
/* NUMA and processor numbers, from the host's topology (/sys/devices/system/node; one node
 * holding every processor where there is none), one processor group (0) as on a host with
 * at most 64 processors. */
SOFTNDK_WDK_API USHORT KeGetCurrentNodeNumber(VOID);
SOFTNDK_WDK_API USHORT KeQueryHighestNodeNumber(VOID);
SOFTNDK_WDK_API VOID KeQueryNodeActiveAffinity(USHORT NodeNumber, PGROUP_AFFINITY Affinity,
                                               PUSHORT Count);
SOFTNDK_WDK_API NTSTATUS KeQueryNodeActiveAffinity2(USHORT NodeNumber,
                                                    PGROUP_AFFINITY GroupAffinities,
                                                    USHORT GroupAffinitiesCount,
                                                    PUSHORT GroupAffinitiesRequired);
SOFTNDK_WDK_API ULONG KeQueryNodeMaximumProcessorCount(USHORT NodeNumber);
SOFTNDK_WDK_API NTSTATUS KeGetProcessorNumberFromIndex(ULONG ProcIndex,
                                                       PPROCESSOR_NUMBER ProcNumber);
SOFTNDK_WDK_API ULONG KeGetProcessorIndexFromNumber(PPROCESSOR_NUMBER ProcNumber);
SOFTNDK_WDK_API ULONG KeQueryMaximumProcessorCountEx(USHORT GroupNumber);
#define KeQueryMaximumProcessorCount() KeQueryMaximumProcessorCountEx(0)
#define KeGetCurrentProcessorIndex()   KeGetCurrentProcessorNumberEx(NULL)
#define INVALID_PROCESSOR_INDEX        0xffffffff

/* ------------------------------------------------------------------------------------------ */
/* Rtl string conversions. Allocated buffers (AllocateDestinationString TRUE, RtlStringFromGUID)
 * are pool with tag 'RtlS', given back with RtlFreeUnicodeString / RtlFreeAnsiString: one not
 * freed is a leak the runner names. ANSI is the "C" code page (bytes 0 to 0xFF are WCHARs 0
 * to 0xFF; a WCHAR above is '?' going back, as Windows' best-fit default character). */
SOFTNDK_WDK_API NTSTATUS RtlAnsiStringToUnicodeString(PUNICODE_STRING DestinationString,
                                                      const ANSI_STRING *SourceString,
                                                      BOOLEAN AllocateDestinationString);
SOFTNDK_WDK_API NTSTATUS RtlUnicodeStringToAnsiString(PANSI_STRING DestinationString,
                                                      const UNICODE_STRING *SourceString,
                                                      BOOLEAN AllocateDestinationString);
SOFTNDK_WDK_API VOID RtlFreeUnicodeString(PUNICODE_STRING UnicodeString);
SOFTNDK_WDK_API VOID RtlFreeAnsiString(PANSI_STRING AnsiString);
SOFTNDK_WDK_API NTSTATUS RtlUnicodeStringToInteger(const UNICODE_STRING *String, ULONG Base,
                                                   PULONG Value);
SOFTNDK_WDK_API NTSTATUS RtlIntegerToUnicodeString(ULONG Value, ULONG Base, PUNICODE_STRING String);
SOFTNDK_WDK_API NTSTATUS RtlStringFromGUID(const GUID *Guid, PUNICODE_STRING GuidString);
SOFTNDK_WDK_API NTSTATUS RtlGUIDFromString(const UNICODE_STRING *GuidString, GUID *Guid);
#define RtlAnsiStringToUnicodeSize(s) ((ULONG)(((s)->Length + 1) * sizeof(WCHAR)))
#define RtlUnicodeStringToAnsiSize(s) ((ULONG)((s)->Length / sizeof(WCHAR) + 1))

#ifdef __cplusplus
}
#endif

/* as Windows' wdm.h: DEFINE_GUID, IsEqualGUID */
#include "guiddef.h"

#endif /* SOFTNDK_WDK_WDM_H */
